"""describe_transactions without a broker: a per-id answer saying the coordinator moved or is
loading (the shared COORDINATOR_CODES) makes it find the coordinator again and retry."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kcodec.client.config import ClientConfig
from kcodec.client.errors import COORDINATOR_CODES, KafkaError
from kcodec.client.net.cluster import Cluster
from kcodec.client.txn_admin import describe_transactions
from kcodec.protocol import DescribeTransactionsRequest, DescribeTransactionsResponse, ErrorCode

State = DescribeTransactionsResponse.TransactionState


def _cluster(codes: list[int]) -> tuple[Cluster, list[int], list[int]]:
    """A cluster whose coordinators answer DescribeTransactions with ``codes`` in turn (the
    id's own error code), each FindCoordinator naming the next broker."""
    cl = Cluster(ClientConfig(bootstrap_servers="127.0.0.1:1", retry_backoff_ms=1))
    cl.brokers = {1: ("h", 1), 2: ("h", 2), 3: ("h", 3)}
    asked: list[int] = []
    found: list[int] = []

    async def find_coordinator(key: str, key_type: int = 0) -> int:
        found.append(len(found) % 3 + 1)
        return found[-1]

    async def request(node: int | None, req: Any, version: int | None = None,
                      timeout: float | None = None) -> Any:
        assert isinstance(req, DescribeTransactionsRequest) and node is not None
        asked.append(node)
        return DescribeTransactionsResponse(transaction_states=[State(
            error_code=codes[len(asked) - 1], transactional_id="tx", transaction_state="Ongoing",
            producer_id=7, producer_epoch=1)])
    cl.find_coordinator = find_coordinator  # type: ignore[method-assign]
    cl.request = request  # type: ignore[method-assign]
    return cl, asked, found


@pytest.mark.parametrize("code", sorted(COORDINATOR_CODES))
def test_a_moved_or_loading_coordinator_is_found_again(code: int) -> None:
    cl, asked, found = _cluster([code, ErrorCode.NONE])
    (d,) = asyncio.run(describe_transactions(cl, ["tx"]))
    assert (d.transactional_id, d.state, d.producer_id) == ("tx", "Ongoing", 7)
    assert asked == [1, 2] and found == [1, 2]      # forgotten after the first answer


def test_another_code_keeps_the_coordinator() -> None:
    cl, asked, found = _cluster([ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NONE])
    asyncio.run(describe_transactions(cl, ["tx"]))
    assert asked == [1, 1] and found == [1]
    cl, asked, found = _cluster([ErrorCode.TRANSACTIONAL_ID_NOT_FOUND])
    with pytest.raises(KafkaError, match="TRANSACTIONAL_ID_NOT_FOUND"):
        asyncio.run(describe_transactions(cl, ["tx"]))
