"""Coordinators: groups (classic, consumer and share protocols), committed offsets, producer
ids, transactions.

    classic_group.py    the group coordinator, classic protocol: membership, rebalances
    consumer_group.py   the group coordinator, consumer protocol (KIP-848): server-side assignment
    migration.py        online migration between the classic and consumer protocols (KIP-848)
    topic_regex.py      regular-expression subscriptions of the consumer protocol (KIP-848)
    offsets.py          the committed offsets of every group and their log (OffsetStore)
    share_group.py      the share-group coordinator (KIP-932): membership and assignment
    producers.py        producer ids and idempotence: each producer's per-partition sequences
    txn.py              the transaction coordinator: transactional ids, partitions, groups, markers
    txn_log.py          its state on disk, and the partition state rebuilt from the logs
"""

from kcodec.broker.coordinator.classic_group import GroupCoordinator
from kcodec.broker.coordinator.offsets import OffsetStore
from kcodec.broker.coordinator.producers import ProducerIds, ProducerState, SequenceError

__all__ = ["GroupCoordinator", "OffsetStore", "ProducerIds", "ProducerState", "SequenceError"]
