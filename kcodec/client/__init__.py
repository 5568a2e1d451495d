"""The kcodec thin client: sans-I/O connection core, asyncio I/O and a blocking facade.

    from kcodec.client import Producer, Consumer, Admin, TopicPartition

Config names follow the Java client's properties in snake_case (``linger_ms``,
``enable_idempotence``, ``auto_offset_reset`` ...); see ``kcodec.client.config``.
"""

from kcodec.client.admin import Admin, AsyncAdmin, NewTopic
from kcodec.client.config import AdminConfig, ConsumerConfig, ProducerConfig
from kcodec.client.consumer import AsyncConsumer, Consumer, ConsumerRecord, RebalanceListener
from kcodec.client.errors import (
                                  AuthenticationError,
                                  BrokerNotAvailableError,
                                  ClientClosedError,
                                  KafkaError,
                                  KafkaTimeoutError,
                                  NoOffsetForPartitionError,
                                  SaslAuthenticationError,
                                  SslAuthenticationError,
)
from kcodec.client.group import TopicPartition
from kcodec.client.producer import AsyncProducer, Producer, RecordFuture, SendResult
from kcodec.client.transactions import (
    AbortableTransactionError,
    ConsumerGroupMetadata,
    FatalTransactionError,
    ProducerFencedError,
    TransactionError,
    TransactionStateError,
)

__all__ = [
    "Producer", "AsyncProducer", "SendResult", "RecordFuture",
    "Consumer", "AsyncConsumer", "ConsumerRecord", "RebalanceListener", "TopicPartition",
    "Admin", "AsyncAdmin", "NewTopic",
    "ProducerConfig", "ConsumerConfig", "AdminConfig",
    "KafkaError", "KafkaTimeoutError", "BrokerNotAvailableError", "ClientClosedError",
    "NoOffsetForPartitionError",
    "AuthenticationError", "SaslAuthenticationError", "SslAuthenticationError",
    "ConsumerGroupMetadata", "TransactionError", "TransactionStateError",
    "AbortableTransactionError", "FatalTransactionError", "ProducerFencedError",
]
