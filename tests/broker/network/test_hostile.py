"""Hostile clients against the broker's network layer: a size prefix announcing a huge frame
and then nothing, frames that stall half-way or drip, oversized frames before
authentication, a hog that reconnects. Other connections, on the same listener and on others,
keep being answered at once; what a connection may hold is bounded; stalled bodies time out.
"""

from __future__ import annotations

import concurrent.futures
import socket
import struct
import threading
import time

import pytest

from kcodec.broker import Cluster
from kcodec.broker.network import Request, RequestChannel
from kcodec.broker.security import ListenerSecurity, PlainServer
from kcodec.protocol import (
    ApiVersionsRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
    decode_response,
    encode_request,
)
from tests.support.broker_raw import Raw

HUGE = 104857600                 # 100 MiB: the default frame limit, and the default budget
USERS = {"alice": "alice-secret"}
LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"


def _sasl_cluster(**kw) -> Cluster:
    sec = ListenerSecurity(sasl={"PLAIN": lambda: PlainServer(USERS)})
    return Cluster(1, listeners=LISTENERS, listener_security={"SASL_PLAINTEXT": sec}, **kw)


def probe(address: str, timeout: float = 3.0) -> float:
    """Seconds an ApiVersions round trip on a new connection takes (raises past timeout)."""
    t = time.monotonic()
    with Raw(address, timeout=timeout) as raw:
        assert raw.call(ApiVersionsRequest(), 0).error_code == 0
    return time.monotonic() - t


def login(address: str, password: str = "alice-secret", timeout: float = 3.0) -> tuple[int, float]:
    """SASL PLAIN by hand on a new connection: (SaslAuthenticate's error code, seconds)."""
    t = time.monotonic()
    with Raw(address, timeout=timeout) as raw:
        assert raw.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        r = raw.call(SaslAuthenticateRequest(auth_bytes=f"\0alice\0{password}".encode()), 2)
        if r.error_code == 0:
            assert raw.call(ApiVersionsRequest(), 0).error_code == 0
        return r.error_code, time.monotonic() - t


def hog(address: str, declared: int = HUGE, body: bytes = b"") -> socket.socket:
    host, port = address.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5)
    s.sendall(struct.pack(">i", declared) + body)
    return s


def run_probes(fn, n: int = 30) -> list:
    """``n`` probes from other connections, five at a time."""
    with concurrent.futures.ThreadPoolExecutor(5) as pool:
        return list(pool.map(lambda _: fn(), range(n)))


def wait_for(cond, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def test_a_huge_declared_size_holds_up_nobody_on_plaintext():
    with Cluster(1) as c:
        h = hog(c.bootstrap)
        try:
            times = run_probes(lambda: probe(c.bootstrap))
            assert max(times) < 2.0, times
            # the hog booked nothing: the budget counts bytes that arrived, not promises
            assert c.nodes[0].channel.queued_bytes == 0
        finally:
            h.close()


def test_a_partly_sent_huge_frame_books_only_what_arrived():
    with Cluster(1, queued_max_bytes=1 << 20) as c:
        h = hog(c.bootstrap, body=b"\x00" * (3 << 20))     # 3 MiB of 100, then nothing
        try:
            assert wait_for(lambda: c.nodes[0].channel.queued_bytes >= 2 << 20)
            assert c.nodes[0].channel.queued_bytes <= 4 << 20
            # over the 1 MiB budget, yet nothing waits for an answer: others go on
            times = run_probes(lambda: probe(c.bootstrap))
            assert max(times) < 2.0, times
        finally:
            h.close()
        assert wait_for(lambda: c.nodes[0].channel.queued_bytes == 0)


def test_before_authentication_frames_are_capped_and_a_hog_stalls_no_login():
    with _sasl_cluster() as c:
        sasl, plain = c.bootstrap_for("SASL_PLAINTEXT"), c.bootstrap_for("PLAINTEXT")
        # Kafka's sasl.server.max.receive.size: 512 KiB before authentication
        too_big = hog(sasl)
        assert Raw.closed(_wrap(too_big), timeout=2)
        too_big.close()
        just_over = hog(sasl, 512 * 1024 + 1)
        assert Raw.closed(_wrap(just_over), timeout=2)
        just_over.close()
        # a hog within the cap that stalls, on the SASL listener: logins on both listeners
        # and plaintext probes all answer at once
        hogs = [hog(sasl, 512 * 1024, b"\x00\x11"), hog(plain)]
        try:
            codes = run_probes(lambda: login(sasl))
            assert {code for code, _ in codes} == {0}
            assert max(t for _, t in codes) < 2.0, codes
            times = run_probes(lambda: probe(plain))
            assert max(times) < 2.0, times
        finally:
            for h in hogs:
                h.close()


def test_a_hog_that_reconnects_stalls_nobody():
    """Hogs that each hold a connection for 2 s and are replaced before they go, on both
    listeners (the budget was never free under the old booking of declared sizes)."""
    with _sasl_cluster() as c:
        sasl, plain = c.bootstrap_for("SASL_PLAINTEXT"), c.bootstrap_for("PLAINTEXT")
        stop = threading.Event()
        rounds = [0]

        def attacker() -> None:
            live: list[tuple[float, list[socket.socket]]] = []
            while not stop.is_set():
                live.append((time.monotonic(), [hog(plain, HUGE, b"\x00" * 4096),
                                                hog(sasl, 512 * 1024)]))
                while live and time.monotonic() - live[0][0] > 2.0:
                    for s in live.pop(0)[1]:
                        s.close()
                    rounds[0] += 1
                stop.wait(0.5)
            for _, socks in live:
                for s in socks:
                    s.close()

        t = threading.Thread(target=attacker, daemon=True)
        t.start()
        try:
            assert wait_for(lambda: rounds[0] >= 1)
            times = run_probes(lambda: probe(plain)) + [t for _, t in run_probes(lambda: login(sasl))]
            assert max(times) < 1.0, times
            assert wait_for(lambda: rounds[0] >= 3)
        finally:
            stop.set()
            t.join(5)
        assert wait_for(lambda: c.nodes[0].channel.queued_bytes == 0)
        assert wait_for(lambda: c.nodes[0].connections == 0)


def test_a_body_that_does_not_arrive_times_out():
    with Cluster(1, request_read_timeout_s=1.0) as c:
        t = time.monotonic()
        stalled = hog(c.bootstrap, 100, b"\x00\x12")
        assert Raw.closed(_wrap(stalled), timeout=5)
        assert 0.9 < time.monotonic() - t < 4
        stalled.close()


def test_a_dripping_body_times_out_too():
    """A byte every 0.2 s keeps the connection busy but never finishes the frame: the
    deadline counts from the size, not from the last byte."""
    with Cluster(1, request_read_timeout_s=1.0) as c:
        s = hog(c.bootstrap, 1000)
        t = time.monotonic()
        closed = False
        try:
            while time.monotonic() - t < 5:
                s.sendall(b"\x00")
                time.sleep(0.2)
        except OSError:
            closed = True
        assert closed or Raw.closed(_wrap(s), timeout=1)
        assert time.monotonic() - t < 4
        s.close()
        assert probe(c.bootstrap) < 2


def test_failed_login_is_logged_with_peer_and_user_and_answered_after_the_delay(caplog):
    with _sasl_cluster(failed_authentication_delay_ms=300) as c:
        sasl = c.bootstrap_for("SASL_PLAINTEXT")
        with caplog.at_level("INFO", logger="kcodec.broker"):
            code, took = login(sasl, password="wrong-pass-123")
        assert code == 58            # SASL_AUTHENTICATION_FAILED
        assert took >= 0.3
        lines = [r.getMessage() for r in caplog.records if r.name.startswith("kcodec.broker")
                 and "failed authentication" in r.getMessage()]
        assert len(lines) == 1, lines
        assert "127.0.0.1:" in lines[0] and "'alice'" in lines[0] and "PLAIN" in lines[0]
        assert "SASL_PLAINTEXT" in lines[0]
        assert "wrong-pass-123" not in caplog.text
        assert caplog.records[-1].levelname == "WARNING" or any(
            r.levelname == "WARNING" for r in caplog.records if "failed authentication" in
            r.getMessage())


def test_the_delay_of_a_failed_login_blocks_no_other_connection():
    with _sasl_cluster(failed_authentication_delay_ms=1500, processors=1) as c:
        sasl = c.bootstrap_for("SASL_PLAINTEXT")
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            bad = [pool.submit(login, sasl, "nope", 5) for _ in range(3)]
            time.sleep(0.2)
            code, took = login(sasl)      # the same processor serves it meanwhile
            assert code == 0 and took < 1.0
            assert [f.result()[0] for f in bad] == [58, 58, 58]


def _wrap(s: socket.socket) -> Raw:
    r = Raw.__new__(Raw)
    r.sock, r.cid = s, 0
    return r


# ---------------------------------------------------------------- the budget's rules
def _req(size: int) -> Request:
    return Request(0, None, 18, 0, 1, b"\x00" * size)


def test_the_budget_is_booked_as_bytes_arrive_and_never_deadlocks():
    ch = RequestChannel(1000)
    assert ch.book(800)                 # a frame being read
    assert ch.book(800)                 # over the budget, but nothing waits for an answer
    first = _req(1600)
    ch.put(first)                       # the frame complete: a request waits now
    assert not ch.book(10)              # full, and answering it will free bytes: wait
    ch.done(first)
    assert ch.queued_bytes == 0 and ch.pending == 0
    assert ch.book(10)
    ch.release(10)
    assert ch.queued_bytes == 0


def test_the_budget_still_applies_backpressure_behind_waiting_requests():
    ch = RequestChannel(1000)
    waiting = [_req(400), _req(400)]
    for r in waiting:
        assert ch.book(r.size)
        ch.put(r)
    assert ch.book(200)                 # room left
    assert not ch.book(1)               # none left, and two answers will free some
    ch.done(waiting[0])
    assert ch.book(1)


def test_an_oversized_frame_after_authentication_is_judged_by_the_normal_limit():
    """Once logged in, a frame above the pre-authentication cap is fine (up to
    max_request_bytes)."""
    with _sasl_cluster(max_request_bytes=2 << 20) as c:
        sasl = c.bootstrap_for("SASL_PLAINTEXT")
        with Raw(sasl) as raw:
            assert raw.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
            assert raw.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"),
                            2).error_code == 0
            # an ApiVersions v3 with a 600 KiB client software name: above 512 KiB
            big = ApiVersionsRequest(client_software_name="x" * (600 * 1024),
                                     client_software_version="1")
            raw.sock.sendall(encode_request(big, 3, 7, client_id="raw"))
            answer = decode_response(raw.recv_frame(), 18, 3, 7)[1]
            assert answer.error_code in (0, 42)    # answered (INVALID_REQUEST: bad name)


@pytest.mark.parametrize("declared", [HUGE, 512 * 1024 + 1])
def test_pre_authentication_cap_closes_before_reading(declared):
    with _sasl_cluster() as c:
        s = hog(c.bootstrap_for("SASL_PLAINTEXT"), declared)
        t = time.monotonic()
        assert Raw.closed(_wrap(s), timeout=3)
        assert time.monotonic() - t < 1.5
        s.close()
        assert c.nodes[0].channel.queued_bytes == 0


def test_one_request_cannot_ask_for_millions_of_partitions():
    """Found by the broker fuzz target: a CreateTopics of 8,388,608 partitions made the
    broker allocate until it stalled. Like Kafka's controller (10,000 records per operation),
    such a request fails whole with POLICY_VIOLATION, at once."""
    from kcodec.protocol import CreatePartitionsRequest, CreateTopicsRequest
    from kcodec.protocol import ErrorCode as E

    C = CreateTopicsRequest
    with Cluster(1) as c, Raw(c.bootstrap) as raw:
        t = time.monotonic()
        r = raw.call(C(topics=[C.CreatableTopic(name="huge", num_partitions=1 << 23,
                                                replication_factor=1)], timeout_ms=1000), 5)
        assert r.topics[0].error_code == E.POLICY_VIOLATION
        assert "excessively large" in r.topics[0].error_message
        r = raw.call(C(topics=[C.CreatableTopic(name=f"big{i}", num_partitions=6000,
                                                replication_factor=1) for i in range(2)],
                       timeout_ms=1000), 5)
        assert [x.error_code for x in r.topics] == [E.POLICY_VIOLATION] * 2
        assert time.monotonic() - t < 2 and not c.state.topics
        c.create_topic("small", 1)
        P = CreatePartitionsRequest
        r = raw.call(P(topics=[P.CreatePartitionsTopic(name="small", count=20_000)],
                       timeout_ms=1000), 2)
        assert r.results[0].error_code == E.POLICY_VIOLATION
        assert len(c.state.topics["small"].partitions) == 1
        assert probe(c.bootstrap) < 2


def test_a_pipelining_client_holds_one_frame_at_a_time():
    """30 Produce requests of 1 MiB sent back to back (the answers not read meanwhile):
    the broker reads the next request only after answering the last, so what is booked for
    the connection stays about one frame, not 30 MiB (the kernel holds the rest)."""
    from kcodec.protocol import ProduceRequest
    from kcodec.records import RecordBatchBuilder

    b = RecordBatchBuilder()
    for _ in range(1000):
        b.append(None, b"x" * 1024, [], int(time.time() * 1000))
    P = ProduceRequest
    frame = encode_request(P(acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name="t", partition_data=[P.PartitionProduceData(index=0, records=b.build())])]), 9, 1)
    with Cluster(1, max_request_bytes=4 << 20) as c:
        c.create_topic("t", 1)
        s = hog(c.bootstrap, len(frame) - 4, frame[4:])      # the first request, whole
        peak = [0]
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], c.nodes[0].channel.queued_bytes)
                time.sleep(0.001)
        w = threading.Thread(target=watch, daemon=True)
        w.start()
        try:
            s.sendall(frame * 29)
            assert wait_for(lambda: c.state.topics["t"].partitions[0].log.log_end_offset
                            == 30 * 1000, timeout=30)
        finally:
            done.set()
            w.join(5)
            s.close()
        assert 0 < peak[0] <= 2 * len(frame), peak[0]
