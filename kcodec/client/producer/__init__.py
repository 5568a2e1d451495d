"""The producer: ``Producer`` (blocking) and ``AsyncProducer`` (asyncio), one engine.

    facade.py        Producer, AsyncProducer, RecordFuture: what applications call
    transactions.py  the transactional producer's state machine
    partitioner.py   the default partitioner (murmur2 keys, KIP-794 sticky keyless)
    accum.py         the per-record append step, compiled or pure (kcodec._impl)
    columnar.py      send_columns: whole Arrow columns to queued batches
"""

from kcodec.client.producer.facade import AsyncProducer, Producer, RecordFuture
from kcodec.client.structs import SendResult

__all__ = ["Producer", "AsyncProducer", "SendResult", "RecordFuture"]
