"""Offset lookups: ListOffsets by timestamp, for seeks, resets and lag.

    list_offsets(cluster, [TopicPartition, ...], EARLIEST | LATEST | timestamp_ms)

One request per partition leader; the offsets of the earliest record, of the end of the
log (LATEST; for ``read_committed``, the last stable offset) or of the first record at or
after a timestamp.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kcodec.client.errors import KafkaError
from kcodec.client.net import requests
from kcodec.client.net.cluster import Cluster
from kcodec.client.structs import TopicPartition

__all__ = ["EARLIEST", "LATEST", "list_offsets"]

EARLIEST, LATEST = -2, -1


async def list_offsets(cluster: Cluster, tps: Iterable[TopicPartition], timestamp: int,
                       read_committed: bool = False) -> dict[TopicPartition, int]:
    """ListOffsets for ``tps`` (EARLIEST, LATEST or a timestamp), grouped by leader."""
    by_node: dict[int, list[TopicPartition]] = {}
    for tp in tps:
        by_node.setdefault(await cluster.leader(tp.topic, tp.partition), []).append(tp)
    out: dict[TopicPartition, int] = {}
    for node, group in by_node.items():
        req = requests.list_offsets([(tp.topic, tp.partition, timestamp) for tp in group],
                                    read_committed)

        async def go(node: int = node, req: Any = req) -> Any:
            body = await cluster.request(node, req)
            for t in body.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise KafkaError(p.error_code, f"ListOffsets {t.name}[{p.partition_index}]")
            return body
        body = await cluster.call(go, "ListOffsets")
        for t in body.topics:
            for p in t.partitions:
                out[TopicPartition(t.name, p.partition_index)] = p.offset
    return out
