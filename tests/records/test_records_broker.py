"""Through the real broker (Tansu): records produced by confluent-kafka with each codec,
fetched raw, decode in kcodec; batches built by kcodec, produced raw, are consumed by
confluent-kafka intact. Tansu rejects magic 0/1 (../shared/reference/tansu.md), so these
cover RecordBatch v2; the legacy formats are covered against the peers' own builders.

The raw Produce v3 / Fetch v4 frames are written here with struct, independently of kcodec
(they are non-flexible versions, so no tagged fields).
"""

from __future__ import annotations

import socket
import struct
import time

import pytest

# confluent-kafka is a test-only peer, imported inside the tests (the `peers` convention).
pytestmark = [pytest.mark.broker, pytest.mark.peers]

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
TS = 1_700_000_000_000


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


class Raw:
    """A minimal blocking Kafka connection for one request at a time."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.cid = 0

    def close(self) -> None:
        self.sock.close()

    def call(self, api_key: int, version: int, body: bytes) -> bytes:
        self.cid += 1
        msg = struct.pack(">hhi", api_key, version, self.cid) + _str("kcodec-test") + body
        self.sock.sendall(struct.pack(">i", len(msg)) + msg)
        size = struct.unpack(">i", self._read(4))[0]
        resp = self._read(size)
        assert struct.unpack(">i", resp[:4])[0] == self.cid
        return resp[4:]

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            out += chunk
        return bytes(out)

    def produce(self, topic: str, partition: int, records: bytes) -> tuple[int, int]:
        body = (struct.pack(">hhi", -1, -1, 10_000) + struct.pack(">i", 1) + _str(topic)
                + struct.pack(">i", 1) + struct.pack(">ii", partition, len(records)) + records)
        resp = self.call(0, 3, body)
        # responses[1]: topic, partitions[1]: partition, error, base_offset, log_append_time
        p = 4
        (tlen,) = struct.unpack_from(">h", resp, p)
        p += 2 + tlen + 4
        _, error, base_offset, _ = struct.unpack_from(">ihqq", resp, p)
        return error, base_offset

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20) -> bytes:
        body = (struct.pack(">iiiib", -1, 100, 1, max_bytes, 0) + struct.pack(">i", 1)
                + _str(topic) + struct.pack(">i", 1)
                + struct.pack(">iqi", partition, offset, max_bytes))
        resp = self.call(1, 4, body)
        p = 4  # throttle
        (ntopics,) = struct.unpack_from(">i", resp, p)
        p += 4
        assert ntopics == 1
        (tlen,) = struct.unpack_from(">h", resp, p)
        p += 2 + tlen
        (nparts,) = struct.unpack_from(">i", resp, p)
        p += 4
        assert nparts == 1
        _, error, _hw, _lso = struct.unpack_from(">ihqq", resp, p)
        p += 4 + 2 + 8 + 8
        assert error == 0, error
        (naborted,) = struct.unpack_from(">i", resp, p)
        p += 4 + max(naborted, 0) * 16
        (rlen,) = struct.unpack_from(">i", resp, p)
        p += 4
        return resp[p:p + max(rlen, 0)]


def _create(broker, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fs = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    for f in fs.values():
        f.result(15)


def rows(n: int = 50) -> list[tuple]:
    return [(f"k{i}".encode() if i % 4 else None, b"value-%d-" % i * (i % 5 + 1),
             [("h", b"x%d" % i), ("n", None)] if i % 2 else [], TS + i) for i in range(n)]


def _fetch_all(broker, topic: str, want: int, records_mod, codecs: set | None = None) -> list:
    raw = Raw(broker.bootstrap)
    try:
        got: list = []
        offset = 0
        deadline = time.monotonic() + 15
        while len(got) < want and time.monotonic() < deadline:
            blob = raw.fetch(topic, 0, offset)
            it = records_mod.iter_batches(blob)
            for batch in it:
                if codecs is not None:
                    codecs.add(batch.compression)
                    assert batch.validate_crc() and batch.magic == 2
                for r in batch:
                    if r.offset >= offset:
                        got.append(r)
                offset = batch.next_offset
            if not blob:
                time.sleep(0.05)
        return got
    finally:
        raw.close()


@pytest.mark.parametrize("codec", list(CODECS))
def test_confluent_produced_batches_decode_in_kcodec(broker, topic_name, twin, codec) -> None:
    import confluent_kafka

    _create(broker, topic_name)
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap,
                                  "compression.type": codec, "linger.ms": 50,
                                  "enable.idempotence": False})
    for k, v, h, ts in rows():
        p.produce(topic_name, value=v, key=k, headers=h, partition=0, timestamp=ts)
    assert p.flush(15) == 0
    seen: set = set()
    got = _fetch_all(broker, topic_name, len(rows()), twin("batch"), seen)
    assert seen == {CODECS[codec]}
    assert [(r.offset, r.key, r.value, r.timestamp) for r in got] == [
        (i, k, v, ts) for i, (k, v, _, ts) in enumerate(rows())]
    assert [r.headers for r in got] == [h for _, _, h, _ in rows()]


@pytest.mark.parametrize("codec", list(CODECS))
def test_kcodec_batches_produced_raw_are_consumed_by_confluent(broker, topic_name, twin,
                                                               codec) -> None:
    import confluent_kafka

    _create(broker, topic_name)
    b = twin("builder").RecordBatchBuilder(compression=CODECS[codec])
    for k, v, h, ts in rows():
        assert b.append(k, v, h, ts) is not None
    raw = Raw(broker.bootstrap)
    try:
        error, base = raw.produce(topic_name, 0, b.build())
    finally:
        raw.close()
    assert error == 0
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic_name,
                                  "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    try:
        c.assign([confluent_kafka.TopicPartition(topic_name, 0, 0)])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < len(rows()) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append(m)
    finally:
        c.close()
    assert [(m.offset(), m.key(), m.value(), m.timestamp()[1]) for m in got] == [
        (i, k, v, ts) for i, (k, v, _, ts) in enumerate(rows())]
    assert [list(m.headers() or []) for m in got] == [h for _, _, h, _ in rows()]
