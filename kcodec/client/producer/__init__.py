"""The producer: ``Producer`` (blocking) and ``AsyncProducer`` (asyncio), one engine.

    facade.py        Producer, AsyncProducer: what applications call
    engine.py        one producer's parts and what joins them
    accumulator.py   open and sealed batches per partition, the producer id stamped on them
    accum.py         the accumulator's core and per-record step, compiled or pure (_impl)
    batch.py         ProducerBatch, RecordFuture
    sender.py        the task that sends batches, retries, resets the producer id
    transactions.py  the transactional producer's state machine
    partitioner.py   the default partitioner (murmur2 keys, KIP-794 sticky keyless)
    columnar.py      send_columns: whole Arrow columns to queued batches
    hooks.py         serializers, partitioner and interceptors, in the order send runs them
"""

from kcodec.client.producer.batch import RecordFuture
from kcodec.client.producer.facade import AsyncProducer, Producer
from kcodec.client.structs import SendResult

__all__ = ["Producer", "AsyncProducer", "SendResult", "RecordFuture"]
