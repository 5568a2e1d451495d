"""The consumer: ``Consumer`` (blocking) and ``AsyncConsumer`` (asyncio), one engine.

    facade.py          Consumer, AsyncConsumer, RebalanceListener: what applications call
    engine.py          one consumer's parts and what joins them
    rebalance.py       the rebalance driver: the steps of a rebalance and of close, in order
    positions.py       the assignment and each partition's position
    fetcher.py         fetch requests, the buffer of fetched blobs, decoding for poll
    visibility.py      what the application sees of a blob (control batches, read_committed)
    membership.py      what every group membership has: coordinator, commits, assignment
    classic_group.py   classic group membership (JoinGroup/SyncGroup, client-side assignors)
    consumer_group.py  consumer-protocol membership (KIP-848: ConsumerGroupHeartbeat)
    commits.py         a group's OffsetCommit and OffsetFetch
    assignors.py       range, roundrobin, sticky, cooperative-sticky
    subscriptions.py   pattern subscriptions and partition counts watched (classic)
    fetch_session.py   incremental fetch sessions (KIP-227)
    list_offsets.py    ListOffsets lookups (earliest, latest, by timestamp)
    fetch_range.py     one partition from an offset, outside any group (the Spark source)
    hooks.py           deserializers and interceptors, on the records poll returns
    observe.py         the consumer's part of the statistics document
"""

from kcodec.client.consumer.facade import AsyncConsumer, Consumer, RebalanceListener
from kcodec.client.consumer.list_offsets import EARLIEST, LATEST, list_offsets
from kcodec.client.structs import ConsumerRecord, TopicPartition

__all__ = ["Consumer", "AsyncConsumer", "ConsumerRecord", "TopicPartition", "RebalanceListener",
           "EARLIEST", "LATEST", "list_offsets"]
