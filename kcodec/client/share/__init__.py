"""The share consumer (KIP-932, "queues for Kafka"): ``ShareConsumer`` (blocking, thread
safe) and ``AsyncShareConsumer`` (asyncio).

    facade.py       ShareConsumer, AsyncShareConsumer: what applications call; the records
                    delivered and their acknowledgements (implicit or explicit mode)
    engine.py       ShareEngine, what both facades share: the records delivered and not yet
                    acknowledged, settled at a poll, a commit or close
    fetcher.py      one ShareFetch loop per broker, the buffer, decoding
    acknowledger.py the acknowledgements and commits waiting, the ShareAcknowledge request
    session.py      a share session with one broker (epochs, partitions)
    membership.py   ShareGroupHeartbeat: joining, the assignment, leaving
    acks.py         AcknowledgeType and the acknowledgement batches
    columns.py      poll_columns: a delivery's records as columns, by acquired range
    _share.py       ShareRecord and its maker, from the twin the process uses
    config.py       ShareConsumerConfig
"""

from kcodec.client.share.acks import AcknowledgeType
from kcodec.client.share.config import ShareConsumerConfig
from kcodec.client.share.facade import AsyncShareConsumer, ShareConsumer, ShareStateError
from kcodec.client.share.fetcher import ShareRecord

ACCEPT = AcknowledgeType.ACCEPT
RELEASE = AcknowledgeType.RELEASE
REJECT = AcknowledgeType.REJECT
RENEW = AcknowledgeType.RENEW

__all__ = ["ShareConsumer", "AsyncShareConsumer", "ShareRecord", "AcknowledgeType",
           "ShareConsumerConfig", "ShareStateError", "ACCEPT", "RELEASE", "REJECT", "RENEW"]
