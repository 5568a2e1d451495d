"""Answers to requests a client sent ahead leave together (``processor._Answers``): held
until the connection's task yields or enough are held, in request order, and never lost
when the connection ends after them."""

from __future__ import annotations

import asyncio
import socket
import struct
import time

from kcodec.broker import Cluster
from kcodec.broker.network import processor
from kcodec.protocol import ProduceRequest, decode_response, encode_request
from kcodec.records import RecordBatchBuilder
from tests.support.broker_raw import Raw

P = ProduceRequest


def _produce(topic: str, cid: int, acks: int = 1) -> bytes:
    b = RecordBatchBuilder()
    b.append(None, b"v%d" % cid, [], int(time.time() * 1000))
    return encode_request(P(acks=acks, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.PartitionProduceData(index=0, records=b.build())])]),
        9, cid)


def _answers(raw: Raw, n: int) -> list[tuple[int, int]]:
    out = []
    for cid in range(1, n + 1):
        body = decode_response(raw.recv_frame(), P.API_KEY, 9, cid)[1]
        part = body.responses[0].partition_responses[0]
        out.append((part.error_code, part.base_offset))
    return out


class _Writer:
    def __init__(self) -> None:
        self.calls: list[list[bytes]] = []

    def writelines(self, data: list[bytes]) -> None:
        self.calls.append(list(data))


def test_held_until_the_loop_turns_or_enough_are_held():
    loop = asyncio.new_event_loop()
    try:
        w = _Writer()
        a = processor._Answers(w, loop)   # type: ignore[arg-type]
        a.send(b"a")
        a.send(b"b")
        assert w.calls == []
        loop.run_until_complete(asyncio.sleep(0))
        assert w.calls == [[b"a", b"b"]]
        for i in range(processor.ANSWERS_AT_ONCE):
            a.send(b"%d" % i)
        assert len(w.calls) == 2 and len(w.calls[1]) == processor.ANSWERS_AT_ONCE
        a.send(b"x" * processor.ANSWER_BYTES_AT_ONCE)        # one big answer: at once
        assert w.calls[2] == [b"x" * processor.ANSWER_BYTES_AT_ONCE]
        a.send(b"last")
        a.flush()
        assert w.calls[3] == [b"last"]
        loop.run_until_complete(asyncio.sleep(0))              # the turn's flush: nothing left
        assert len(w.calls) == 4
    finally:
        loop.close()


def test_pipelined_requests_are_answered_in_order():
    with Cluster(1) as c:
        c.create_topic("t", 1)
        with Raw(c.bootstrap) as raw:
            raw.sock.sendall(b"".join(_produce("t", cid) for cid in range(1, 41)))
            got = _answers(raw, 40)
    assert got == [(0, i) for i in range(40)]


def test_a_client_that_stopped_sending_still_gets_every_answer():
    with Cluster(1) as c:
        c.create_topic("t", 1)
        with Raw(c.bootstrap) as raw:
            raw.sock.sendall(b"".join(_produce("t", cid) for cid in range(1, 11)))
            raw.sock.shutdown(socket.SHUT_WR)
            got = _answers(raw, 10)
            assert raw.closed()
    assert got == [(0, i) for i in range(10)]


def test_answers_before_a_request_that_closes_the_connection_are_sent():
    with Cluster(1) as c:
        c.create_topic("t", 1)
        bad = struct.pack(">ihhi", 10, 9999, 0, 99) + b"\0\0"     # an unknown API key
        with Raw(c.bootstrap) as raw:
            raw.sock.sendall(b"".join(_produce("t", cid) for cid in range(1, 6)) + bad)
            got = _answers(raw, 5)
            assert raw.closed()
    assert got == [(0, i) for i in range(5)]
