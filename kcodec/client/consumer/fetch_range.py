"""Reading one partition from a given offset, outside any group: the fetch-range API.

For readers that plan their own offset ranges and positions (the Spark source,
kcodec.spark): one sessionless Fetch of one partition at a time, with the consumer's
request and its topic-id rule (KIP-516), and the consumer's rules for what of the answer
to show::

    part = await fetch_partition(cluster, "t", 0, offset, max_bytes=8 << 20,
                                 max_wait_ms=100, read_committed=False)
    part.error_code, part.high_watermark, part.log_start_offset, part.records
    blob, next_offset = visible_range(part.records, offset, part.aborted_transactions,
                                      read_committed=False)

``blob`` is what a consumer shows of the records, for ``decode_columns`` (under
read_committed the aborted transactions' batches left out; control batches it skips
itself); ``next_offset`` the offset after the last whole batch, where the next fetch
starts. A top-level error of the answer raises ``KafkaError``; a partition error is
returned: ``RETRIABLE`` names those to retry (after a metadata refresh).
"""

from __future__ import annotations

from typing import Any

from kcodec.client.consumer.fetcher import FETCH_REFRESH_CODES
from kcodec.client.consumer.visibility import Fetched, visible_blob
from kcodec.client.errors import KafkaError
from kcodec.client.net import requests
from kcodec.client.net.cluster import Cluster
from kcodec.client.structs import TopicPartition
from kcodec.protocol import ApiKey, ErrorCode
from kcodec.records.header import next_offset

__all__ = ["fetch_partition", "visible_range", "RETRIABLE"]

# partition errors a later fetch may not have: retry after fresh metadata (as the consumer)
RETRIABLE = FETCH_REFRESH_CODES | {ErrorCode.UNKNOWN_LEADER_EPOCH}
_NO_PARTITION = TopicPartition("", -1)     # (visibility needs no name)


async def fetch_partition(cluster: Cluster, topic: str, partition: int, offset: int, *,
                          max_bytes: int, max_wait_ms: int, read_committed: bool,
                          partition_max_bytes: int | None = None,
                          timeout: float | None = None) -> Any:
    """Fetch ``topic[partition]`` from ``offset`` from its leader: the answer's partition
    (``FetchResponse.PartitionData``); one attempt, retry through ``cluster.call``."""
    leader = await cluster.leader(topic, partition)
    version, ids = cluster.by_topic_id(
        ApiKey.FETCH, (await cluster.connection(leader)).core.version(ApiKey.FETCH), {topic})
    req = requests.fetch(
        max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
        read_committed=read_committed, session_id=0, session_epoch=-1,
        partitions=[(topic, partition, offset)],
        partition_max_bytes=max_bytes if partition_max_bytes is None else partition_max_bytes,
        topic_ids=ids)
    if timeout is None:
        timeout = cluster.config.request_timeout_ms / 1000 + max_wait_ms / 1000
    body = await cluster.request(leader, req, version, timeout=timeout)
    if body.error_code:
        raise KafkaError(body.error_code, "Fetch")
    for t in body.responses:
        name = t.topic if ids is None else cluster.topic_names.get(t.topic_id)
        if name != topic:
            continue
        for p in t.partitions:
            if p.partition_index == partition:
                return p
    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Fetch")


def visible_range(records: Any, offset: int, aborted: Any,
                  read_committed: bool) -> tuple[Any, int]:
    """(what a consumer shows of a fetched ``records`` blob, for ``decode_columns``; the
    offset after its last whole batch, at least ``offset``); ``aborted``: the answer's
    aborted transactions."""
    nxt = next_offset(records, offset)
    blob, _ = visible_blob(Fetched(_NO_PARTITION, offset, records, aborted, 0), read_committed)
    return blob, nxt
