"""InitProducerId: producer ids and epochs for idempotent (and transactional) producers."""

from __future__ import annotations

from typing import Any

from kcodec.broker.apis.registry import api
from kcodec.protocol import InitProducerIdResponse

__all__: list[str] = []


@api(22, 0, 5)
def init_producer_id(node: Any, req: Any) -> Any:
    b = req.body
    pid, epoch = node.cluster.producer_ids.init(
        b.transactional_id, b.producer_id if req.api_version >= 3 else -1,
        b.producer_epoch if req.api_version >= 3 else -1)
    return InitProducerIdResponse(error_code=0, producer_id=pid, producer_epoch=epoch)
