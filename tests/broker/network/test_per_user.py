"""Bounds per user on a real broker: connections of one authenticated principal
(``max.connections.per.user``) and its share of the node's queued-request budget
(``queued.max.request.bytes.per.user``); ANONYMOUS, every client of a listener without
authentication, is bounded by address instead and keeps its many connections."""

from __future__ import annotations

import time

from kcodec.broker import Cluster
from kcodec.broker.security import ListenerSecurity, PlainServer
from kcodec.protocol import (
    ApiVersionsRequest,
    FetchRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
    encode_request,
)
from tests.support.broker_raw import Raw

USERS = {"alice": "a-pw", "bob": "b-pw", "mallory": "m-pw"}
LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
SHARE: dict = {}


def _cluster(**config) -> Cluster:
    sec = ListenerSecurity(sasl={"PLAIN": lambda: PlainServer(USERS)})
    return Cluster(1, listeners=LISTENERS, listener_security={"SASL_PLAINTEXT": sec},
                   config=config)


def _login(address: str, user: str) -> Raw | None:
    """A connection logged in as ``user``, or None if the broker closed it at the login."""
    raw = Raw(address, timeout=5)
    try:
        assert raw.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        r = raw.call(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{USERS[user]}".encode()), 2)
        assert r.error_code == 0
        assert raw.call(ApiVersionsRequest(), 0).error_code == 0
        return raw
    except (OSError, EOFError):
        raw.close()
        return None


def _wait_for(cond, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def test_connections_per_user_are_bounded_anonymous_ones_by_address_only(caplog):
    with _cluster(**{"max.connections.per.user": 2}) as c:
        sasl, plain = c.bootstrap_for("SASL_PLAINTEXT"), c.bootstrap_for("PLAINTEXT")
        alice = [_login(sasl, "alice"), _login(sasl, "alice")]
        assert all(alice)
        with caplog.at_level("WARNING", logger="kcodec.broker.security"):
            assert _login(sasl, "alice") is None             # the third: closed at login
        assert "User:alice has 2 connections open, its limit is 2" in caplog.text
        bob = _login(sasl, "bob")                            # another user: its own count
        assert bob is not None
        anonymous = [Raw(plain, timeout=5) for _ in range(5)]   # not counted per user
        assert all(r.call(ApiVersionsRequest(), 0).error_code == 0 for r in anonymous)
        alice.pop().close()                                  # a place again, once it is gone
        assert _wait_for(lambda: c.nodes[0].quotas.by_user.get("User:alice") == 1)
        again = _login(sasl, "alice")
        assert again is not None
        for r in [*alice, bob, again, *anonymous]:
            r.close()
        assert _wait_for(lambda: c.nodes[0].quotas.by_user == {})


def _delayed_fetch(raw: Raw, topic: str, pad: int) -> None:
    """Send (not await) a Fetch that waits 3 s in purgatory for records that never come,
    padded to about ``pad`` bytes with its rack id: ``pad`` bytes of the budget held."""
    F = FetchRequest
    req = F(max_wait_ms=3000, min_bytes=1, max_bytes=1 << 20, rack_id="r" * pad,
            topics=[F.FetchTopic(topic=topic, partitions=[F.FetchPartition(
                partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    raw.sock.sendall(encode_request(req, 12, 1000, client_id="raw"))


def test_one_user_cannot_fill_the_queued_request_budget():
    """mallory's delayed requests hold her share (100 KB of the node's 200 KB); her next
    ones wait, and alice's request is read and answered at once, not after the 3 s the
    held requests wait (with the whole budget mallory's, alice waited for them)."""
    with _cluster(**{"queued.max.request.bytes": 200_000, **SHARE}) as c:
        c.create_topic("t", 1)
        sasl = c.bootstrap_for("SASL_PLAINTEXT")
        mallory = [_login(sasl, "mallory") for _ in range(4)]
        alice = _login(sasl, "alice")
        assert all(mallory) and alice is not None
        for raw in mallory:
            _delayed_fetch(raw, "t", 60_000)
        channel = c.nodes[0].channel
        assert _wait_for(lambda: channel.pending_by.get("User:mallory", 0) >= 1)
        time.sleep(0.2)            # her other frames arrive and wait for the budget
        assert channel.booked_by.get("User:mallory", 0) <= 100_000 + 60_000
        t0 = time.monotonic()
        big = ApiVersionsRequest(client_software_name="x" * 60_000,
                                 client_software_version="1")
        alice.sock.sendall(encode_request(big, 3, 7, client_id="raw"))
        alice.recv_frame()
        took = time.monotonic() - t0
        assert took < 1.0, f"alice waited {took:.2f} s behind mallory's requests"
        for raw in [*mallory, alice]:
            raw.close()
