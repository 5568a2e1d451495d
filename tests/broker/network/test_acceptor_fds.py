"""The broker in a process that holds many open files.

A broker started after the process had opened more than 1,024 descriptors used to accept
TCP connections (the kernel's listen backlog) and never answer them: its acceptor waited with
``select.select``, which cannot watch a descriptor numbered 1024 or more, and the thread ended
silently. And an ``accept`` that failed for want of descriptors (EMFILE) ended it for good.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid

import pytest

from kcodec.broker import Cluster
from kcodec.protocol import ApiVersionsRequest
from tests.support.broker_raw import Raw

resource = pytest.importorskip("resource", reason="descriptor limits are a POSIX feature")

HIGH = 1100           # well past select()'s FD_SETSIZE of 1024


@pytest.fixture
def nofile_limit():
    """Restores the soft RLIMIT_NOFILE the test changes."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    yield soft, hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _next_fd() -> int:
    fd = os.open(os.devnull, os.O_RDONLY)
    os.close(fd)
    return fd


def _listen_fds(c: Cluster) -> list[int]:
    acceptors = c.nodes[0]._parts[0]
    return [a.sock.fileno() for a in acceptors]


def test_broker_started_with_descriptors_above_1024_answers(nofile_limit) -> None:
    soft, hard = nofile_limit
    want = HIGH + 200
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            pytest.skip(f"the hard descriptor limit ({hard}) is below {want}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    held: list[int] = []
    try:
        while not held or held[-1] < HIGH:     # what a long test run or server had open
            held.append(os.open(os.devnull, os.O_RDONLY))
        with Cluster(1) as c:
            assert min(_listen_fds(c)) >= 1024, "the condition under test was not created"
            with Raw(c.bootstrap, timeout=5.0) as raw:
                assert raw.sock.fileno() >= 1024
                assert raw.call(ApiVersionsRequest(), 0).error_code == 0
            # and the client, whose sockets are high too, produces and consumes through it
            from kcodec.client import Consumer, Producer, TopicPartition

            topic = f"t-{uuid.uuid4().hex[:8]}"
            c.create_topic(topic, 1)
            with Producer(bootstrap_servers=c.bootstrap) as p:
                p.send(topic, b"v", key=b"k", partition=0)
                p.flush(10)
            got: list[bytes] = []
            with Consumer(bootstrap_servers=c.bootstrap, auto_offset_reset="earliest",
                          fetch_max_wait_ms=50) as cons:
                cons.assign([TopicPartition(topic, 0)])
                deadline = time.monotonic() + 10
                while not got and time.monotonic() < deadline:
                    got += [r.value for recs in cons.poll(0.5).values() for r in recs]
            assert got == [b"v"]
    finally:
        for fd in held:
            os.close(fd)


def test_acceptor_survives_running_out_of_descriptors(nofile_limit, caplog) -> None:
    soft, hard = nofile_limit
    caplog.set_level(logging.INFO, logger="kcodec.broker")
    with Cluster(1) as c:
        host, port = c.bootstrap.rsplit(":", 1)
        client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            # no descriptor left: the next accept() fails with EMFILE, the connection stays
            # in the backlog (the client's connect completes all the same)
            resource.setrlimit(resource.RLIMIT_NOFILE, (_next_fd(), hard))
            try:
                client.connect((host, int(port)))
                deadline = time.monotonic() + 1.0    # the acceptor wakes at once
                while "cannot accept" not in caplog.text and time.monotonic() < deadline:
                    time.sleep(0.02)
            finally:
                resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
            # descriptors again: the acceptor takes the waiting connection and it is served
            raw = Raw.__new__(Raw)
            raw.sock, raw.cid = client, 0
            client.settimeout(5.0)
            assert raw.call(ApiVersionsRequest(), 0).error_code == 0
            with Raw(c.bootstrap, timeout=5.0) as other:
                assert other.call(ApiVersionsRequest(), 0).error_code == 0
            # the shortage happened (the test tested it) and was reported once, then its end
            assert caplog.text.count("cannot accept") == 1, caplog.text
            assert "accepting connections" in caplog.text, caplog.text
        finally:
            client.close()
