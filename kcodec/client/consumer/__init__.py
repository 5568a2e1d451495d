"""The consumer: ``Consumer`` (blocking) and ``AsyncConsumer`` (asyncio), one engine.

    facade.py          Consumer, AsyncConsumer, RebalanceListener: what applications call
    classic_group.py   classic group membership (JoinGroup/SyncGroup, client-side assignors)
    consumer_group.py  consumer-protocol membership (KIP-848: ConsumerGroupHeartbeat)
    assignors.py       range, roundrobin, cooperative-sticky
    fetch_session.py   incremental fetch sessions (KIP-227)
"""

from kcodec.client.consumer.facade import (
    EARLIEST,
    LATEST,
    AsyncConsumer,
    Consumer,
    RebalanceListener,
    list_offsets,
)
from kcodec.client.structs import ConsumerRecord, TopicPartition

__all__ = ["Consumer", "AsyncConsumer", "ConsumerRecord", "TopicPartition", "RebalanceListener",
           "EARLIEST", "LATEST", "list_offsets"]
