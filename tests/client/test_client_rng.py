"""The client draws its jitter and its bootstrap order from its own generator: a program
that seeded the global ``random`` gets the same sequence with a kcodec client running. And
a bootstrap address that accepts but never answers costs no more than the api timeout."""

from __future__ import annotations

import random
import socket
import time

import pytest

from kcodec.broker.cluster import Cluster
from kcodec.client import Admin, Consumer, Producer
from kcodec.client.errors import BrokerNotAvailableError


def test_a_client_run_leaves_the_global_random_sequence_alone() -> None:
    with Cluster(1) as broker:
        _round_trip(f"{broker.bootstrap},127.0.0.1:1")


def _round_trip(boot: str) -> None:
    random.seed(1234)
    state = random.getstate()
    # bootstrap order (shuffled at every connection attempt), then a whole round trip
    with Admin(bootstrap_servers=boot) as admin:
        admin.create_topics({"rng": 2})
    with Producer(bootstrap_servers=boot) as p:
        for i in range(20):
            p.send("rng", b"v%d" % i)             # keyless: the sticky partitioner draws too
        p.flush()
    with Consumer("rng", bootstrap_servers=boot, group_id="rng", auto_offset_reset="earliest") as c:
        got = 0
        for _ in range(50):
            got += sum(len(v) for v in c.poll(0.2).values())
            if got == 20:
                break
    assert got == 20
    assert random.getstate() == state


def test_a_silent_listener_fails_within_the_api_timeout_naming_it() -> None:
    """A local listener that accepts and never answers: each connection attempt's handshake
    would wait socket_connection_setup_timeout_ms (10 s); the client retries with backoff
    and gives up at api_timeout_ms, saying which address and why, without drawing from the
    global random."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)                         # connections complete, nobody reads
        addr = f"127.0.0.1:{silent.getsockname()[1]}"
        random.seed(99)
        state = random.getstate()
        t0 = time.monotonic()
        with Admin(bootstrap_servers=addr, request_timeout_ms=150, api_timeout_ms=1200,
                   reconnect_backoff_ms=50) as admin:
            with pytest.raises(BrokerNotAvailableError, match="no broker reachable") as info:
                admin.list_topics()
        took = time.monotonic() - t0
        assert random.getstate() == state
    assert addr in str(info.value) and "Kafka handshake" in str(info.value)
    assert took < 4.0          # the deadline (1.2 s), not the 10 s handshake nor the grace
