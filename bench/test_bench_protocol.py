"""Protocol messages: workloads P-metadata, P-fetch and P-produce of workloads.md.

    P-metadata  MetadataResponse (highest version): 3 brokers, 100 topics x 10 partitions,
                3 replicas and 3 ISR each -- encode and decode.
    P-fetch     FetchResponse (highest version): 50 partitions, each a 64 KiB records blob
                kept opaque -- encode and decode.
    P-produce   ProduceRequest (highest version): 50 partitions, 16 KiB records each --
                encode and decode.

kcodec (compiled and pure twins) side by side with kafka-python 3.x's protocol classes
(the peer). Target (issue 4): compiled encode and decode >= 3x kafka-python.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable

import pytest

from bench.conftest import rng, twin
from kcodec.protocol import FetchResponse, MetadataResponse, ProduceRequest
from tests.kafka_python_peer import PEER, to_peer


def metadata() -> Any:
    M = MetadataResponse
    r = rng("P-metadata")
    brokers = [M.MetadataResponseBroker(node_id=i, host=f"broker-{i}.example.com", port=9092,
                                        rack=f"rack-{i}") for i in range(3)]
    topics = []
    for t in range(100):
        parts = []
        for p in range(10):
            replicas = [(p + k) % 3 for k in range(3)]
            parts.append(M.MetadataResponsePartition(
                partition_index=p, leader_id=replicas[0], leader_epoch=r.randrange(100),
                replica_nodes=replicas, isr_nodes=list(replicas), offline_replicas=[]))
        topics.append(M.MetadataResponseTopic(
            name=f"topic-{t:03d}-{r.randbytes(4).hex()}", topic_id=uuid.UUID(bytes=r.randbytes(16)),
            partitions=parts, topic_authorized_operations=-2147483648))
    return M(brokers=brokers, cluster_id="cluster-abc", controller_id=1, topics=topics)


def fetch() -> Any:
    F = FetchResponse
    r = rng("P-fetch")
    blob = r.randbytes(64 * 1024)
    parts = [F.PartitionData(partition_index=i, high_watermark=1_000_000 + i,
                             last_stable_offset=1_000_000 + i, log_start_offset=0,
                             preferred_read_replica=-1, records=blob) for i in range(50)]
    return F(session_id=0, responses=[F.FetchableTopicResponse(
        topic_id=uuid.UUID(bytes=r.randbytes(16)), partitions=parts)])


def produce() -> Any:
    P = ProduceRequest
    r = rng("P-produce")
    blob = r.randbytes(16 * 1024)
    parts = [P.PartitionProduceData(index=i, records=blob) for i in range(50)]
    return P(acks=-1, timeout_ms=30000, topic_data=[P.TopicProduceData(
        topic_id=uuid.UUID(bytes=r.randbytes(16)), partition_data=parts)])


WORKLOADS = {"P-metadata": metadata, "P-fetch": fetch, "P-produce": produce}
_built: dict[str, tuple[Any, int, bytes, Any]] = {}


def workload(name: str) -> tuple[Any, int, bytes, Any]:
    """(kcodec message, version, its encoding, the peer's message)."""
    if name not in _built:
        msg = WORKLOADS[name]()
        cls = type(msg)
        version = min(cls.MAX_VERSION, PEER[cls.NAME].max_version)
        if cls.LATEST_UNSTABLE:
            version -= 1
        data = msg.encode(version)
        peer = to_peer(PEER[cls.NAME], msg, version)
        # the same message on both sides (kafka-python also writes default tagged structs)
        assert cls.decode(bytes(peer.encode(version=version)), version) == msg
        _built[name] = (msg, version, data, peer)
    return _built[name]


def _encoders(name: str) -> dict[str, Callable[[], Callable[[], Any]]]:
    msg, version, _data, peer = workload(name)
    plan = type(msg).plan(version)

    def kc(impl: str) -> Callable[[], Callable[[], Any]]:
        def make() -> Callable[[], Any]:
            enc = twin("protocol", impl).encode_struct
            return lambda: enc(plan, msg)

        return make

    return {
        "kcodec cython": kc("cython"),
        "kcodec python": kc("python"),
        "kafka-python": lambda: (lambda: peer.encode(version=version)),
    }


def _decoders(name: str) -> dict[str, Callable[[], Callable[[], Any]]]:
    msg, version, data, peer = workload(name)
    plan = type(msg).plan(version)
    peer_cls = PEER[type(msg).NAME]

    def kc(impl: str) -> Callable[[], Callable[[], Any]]:
        def make() -> Callable[[], Any]:
            dec = twin("protocol", impl).decode_struct
            return lambda: dec(plan, data, 0, True)

        return make

    return {
        "kcodec cython": kc("cython"),
        "kcodec python": kc("python"),
        "kafka-python": lambda: (lambda: peer_cls.decode(data, version=version)),
    }


NAMES = ["kcodec cython", "kcodec python", "kafka-python"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("wl", list(WORKLOADS))
def test_encode(benchmark, ratios, wl: str, name: str) -> None:
    benchmark.group = f"{wl} encode"
    fn = _encoders(wl)[name]()
    out = benchmark(fn)
    msg, version, data, _peer = workload(wl)
    assert type(msg).decode(bytes(out), version) == msg
    ratios.add(f"{wl} encode", name, benchmark)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("wl", list(WORKLOADS))
def test_decode(benchmark, ratios, wl: str, name: str) -> None:
    benchmark.group = f"{wl} decode"
    fn = _decoders(wl)[name]()
    out = benchmark(fn)
    if name.startswith("kcodec"):
        assert out[0] == workload(wl)[0] or out[0].encode(workload(wl)[1]) == workload(wl)[2]
    ratios.add(f"{wl} decode", name, benchmark)
