"""Protocol messages: workloads P-metadata, P-fetch and P-produce of workloads.md.

    P-metadata  MetadataResponse (highest version): 3 brokers, 100 topics x 10 partitions,
                3 replicas and 3 ISR each -- encode and decode.
    P-fetch     FetchResponse (highest version): 50 partitions, each a 64 KiB records blob
                kept opaque -- encode and decode.
    P-produce   ProduceRequest (highest version): 50 partitions, 16 KiB records each --
                encode and decode.

kcodec (compiled and pure twins) side by side with kafka-python 3.x's protocol classes
(the peer) at the highest version both have, and with aiokafka's protocol classes (a second
peer) at the highest version aiokafka has (Metadata v5, Fetch v11, Produce v8): those rows
are separate workloads ("... @ aiokafka version"), kcodec measured at the same version.
Target: compiled encode and decode >= 3x kafka-python.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from bench.conftest import rng, twin
from kcodec.protocol import FetchResponse, MetadataResponse, ProduceRequest
from kcodec.protocol import _plan as P
from tests.support.kafka_python_peer import PEER, to_peer


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
            enc = twin("engine", impl).encode_struct
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
            dec = twin("engine", impl).decode_struct
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


# -- aiokafka's protocol classes: the second peer ------------------------------------------

def _aiokafka_class(name: str) -> tuple[int, Any]:
    """(highest version, class) of aiokafka's ``name`` (one class per version there)."""
    import importlib

    module = {"MetadataResponse": "metadata", "FetchResponse": "fetch",
              "ProduceRequest": "produce"}[name]
    mod = importlib.import_module(f"aiokafka.protocol.{module}")
    versions = [int(n.rsplit("_v", 1)[1]) for n in dir(mod) if n.startswith(f"{name}_v")]
    top = max(versions)
    return top, getattr(mod, f"{name}_v{top}")


def _to_aiokafka(obj: Any, plan: Any) -> tuple[Any, ...]:
    """The field values of ``obj`` in wire order (aiokafka's structs are positional; at the
    non-flexible versions aiokafka has, both sides have the same fields in the same order)."""
    out: list[Any] = []
    for code, key, _what, _nullable, elem, sub, _tag, _default in plan.ops:
        v = getattr(obj, key)
        if code == P.STRUCT:
            v = _to_aiokafka(v, sub)
        elif code in (P.ARRAY, P.CARRAY) and elem == P.STRUCT and v is not None:
            v = [_to_aiokafka(x, sub) for x in v]
        elif code in (P.RECORDS, P.CRECORDS) and v is not None:
            v = bytes(v)
        out.append(v)
    return tuple(out)


_aio_built: dict[str, tuple[Any, int, bytes, Any]] = {}


def aio_workload(name: str) -> tuple[Any, int, bytes, Any]:
    """(kcodec message at aiokafka's version, version, its encoding, aiokafka's message)."""
    if name not in _aio_built:
        full = WORKLOADS[name]()
        cls = type(full)
        version, aio_cls = _aiokafka_class(cls.NAME)
        msg = cls.decode(full.encode(version), version)   # what that version carries
        data = msg.encode(version)
        peer = aio_cls(*_to_aiokafka(msg, cls.plan(version)))
        assert peer.encode() == data, f"{name}: aiokafka v{version} encodes differently"
        _aio_built[name] = (msg, version, data, peer)
    return _aio_built[name]


AIO_NAMES = ["kcodec cython", "aiokafka"]


def _aio_fn(wl: str, name: str, op: str) -> Callable[[], Any]:
    msg, version, data, peer = aio_workload(wl)
    plan = type(msg).plan(version)
    if name == "aiokafka":
        return peer.encode if op == "encode" else (lambda: type(peer).decode(data))
    m = twin("engine", "cython")
    if op == "encode":
        enc = m.encode_struct
        return lambda: enc(plan, msg)
    dec = m.decode_struct
    return lambda: dec(plan, data, 0, True)


@pytest.mark.parametrize("op", ["encode", "decode"])
@pytest.mark.parametrize("name", AIO_NAMES)
@pytest.mark.parametrize("wl", list(WORKLOADS))
def test_aiokafka_peer(benchmark, ratios, wl: str, name: str, op: str) -> None:
    pytest.importorskip("aiokafka")
    msg, version, data, peer = aio_workload(wl)
    label = f"{wl} {op} @ aiokafka v{version}"
    benchmark.group = label
    out = benchmark(_aio_fn(wl, name, op))
    if op == "encode":
        assert bytes(out) == data
    elif name == "aiokafka":
        assert out.encode() == data
    else:
        assert out[0] == msg
    ratios.add(label, name, benchmark)
