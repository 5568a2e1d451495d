"""The kcodec thin client: sans-I/O connection core, asyncio I/O and a blocking facade.

    from kcodec.client import Producer, Consumer, Admin, TopicPartition

Config names follow the Java client's properties in snake_case (``linger_ms``,
``enable_idempotence``, ``auto_offset_reset`` ...); see ``kcodec.client.config``.

Where things are (each package's docstring lists its modules)::

    net/        connections, metadata, requests, security: what all clients share
    consumer/   Consumer and AsyncConsumer, group membership, fetching
    share/      ShareConsumer and AsyncShareConsumer (share groups, KIP-932)
    producer/   Producer and AsyncProducer, batching, sending, transactions
    admin.py    Admin and AsyncAdmin; what it does by area: config_admin.py (configs),
                quota_admin.py (client quotas), scram_admin.py (SCRAM users),
                txn_admin.py (transactions from outside), offset_reset.py (a group's
                committed offsets reset)
    coordinator.py  where a group's or transactional id's coordinator is, for every client
    config.py   the configurations;  structs.py  the value types;  errors.py  the errors
    config_names.py  the configuration names of other clients, and what kcodec makes of them
    hooks.py    user-supplied hooks: how they are named, called and guarded
    metrics.py  the metrics, named as the Java client's;  stats.py  the statistics document
    telemetry.py  KIP-714: the client's metrics pushed to the broker
"""

from kcodec import _moved
from kcodec.client.admin import Admin, AsyncAdmin, NewTopic
from kcodec.client.config import AdminConfig, ConsumerConfig, ProducerConfig
from kcodec.client.consumer import AsyncConsumer, Consumer, RebalanceListener
from kcodec.client.errors import (
    AssignorError,
    AuthenticationError,
    BatchTooLargeError,
    BrokerNotAvailableError,
    ClientClosedError,
    HookError,
    KafkaError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
    PartitionerError,
    RecordDeserializationError,
    RecordTooLargeError,
    SaslAuthenticationError,
    SerializationError,
    SslAuthenticationError,
)
from kcodec.client.hooks import AckMetadata, ProducerRecord, SerializationContext
from kcodec.client.producer import AsyncProducer, Producer, RecordFuture
from kcodec.client.producer.transactions import (
    AbortableTransactionError,
    FatalTransactionError,
    PreparedTxnState,
    ProducerFencedError,
    TransactionError,
    TransactionStateError,
)
from kcodec.client.share import (
    AcknowledgeType,
    AsyncShareConsumer,
    ShareConsumer,
    ShareRecord,
    ShareStateError,
)
from kcodec.client.structs import ConsumerGroupMetadata, ConsumerRecord, SendResult, TopicPartition

# the modules' paths before the client was split by role (kcodec/_moved.py)
_moved.install({
    "kcodec.client.core": "kcodec.client.net.core",
    "kcodec.client.conn": "kcodec.client.net.conn",
    "kcodec.client.cluster": "kcodec.client.net.cluster",
    "kcodec.client.security": "kcodec.client.net.security",
    "kcodec.client.sasl": "kcodec.client.net.sasl",
    "kcodec.client.group": "kcodec.client.consumer.classic_group",
    "kcodec.client.consumer_group": "kcodec.client.consumer.consumer_group",
    "kcodec.client.assignors": "kcodec.client.consumer.assignors",
    "kcodec.client.fetch_session": "kcodec.client.consumer.fetch_session",
    "kcodec.client.transactions": "kcodec.client.producer.transactions",
    "kcodec.client.partitioner": "kcodec.client.producer.partitioner",
}, removed_in="0.3")

__all__ = [
    "Producer", "AsyncProducer", "SendResult", "RecordFuture",
    "Consumer", "AsyncConsumer", "ConsumerRecord", "RebalanceListener", "TopicPartition",
    "Admin", "AsyncAdmin", "NewTopic",
    "ProducerConfig", "ConsumerConfig", "AdminConfig",
    "KafkaError", "KafkaTimeoutError", "BrokerNotAvailableError", "ClientClosedError",
    "NoOffsetForPartitionError", "RecordTooLargeError", "BatchTooLargeError",
    "AuthenticationError", "SaslAuthenticationError", "SslAuthenticationError",
    "ConsumerGroupMetadata", "TransactionError", "TransactionStateError",
    "AbortableTransactionError", "FatalTransactionError", "ProducerFencedError",
    "PreparedTxnState",
    "ShareConsumer", "AsyncShareConsumer", "ShareRecord", "AcknowledgeType", "ShareStateError",
    "HookError", "PartitionerError", "SerializationError", "RecordDeserializationError",
    "AssignorError", "ProducerRecord", "AckMetadata", "SerializationContext",
]
