"""Where a coordinator is: the broker that owns a consumer group, a share group or a
transactional id (Java's ``CoordinatorRequestManager``), for whichever client asks it.

    Coordinator   found with FindCoordinator (retried), kept until an answer or a lost
                  connection says it moved; ``request`` sends to it and forgets it on a
                  move, ``call`` does so until it succeeds or ``api_timeout_ms`` runs out

The consumer's group members (classic and consumer protocol), the share consumer, the
transactional producer (its own coordinator and, for TxnOffsetCommit, the group's) and the
admin client each hold one. A group's coordinator is asked on a connection of its own
(``coordinator_channel``), so a commit or a heartbeat never waits behind the long-poll
fetch on that broker's data connection; the transaction coordinator is asked on the
broker's connection, as Java's sender does.
"""

from __future__ import annotations

from typing import TypeVar

from kcodec.client.errors import (
    COORDINATOR_CODES,
    BrokerNotAvailableError,
    KafkaError,
    KafkaTimeoutError,
)
from kcodec.client.net import requests
from kcodec.client.net.cluster import Cluster, coordinator_channel
from kcodec.errors import ProtocolError
from kcodec.protocol import Request, Response

__all__ = ["Coordinator"]

R = TypeVar("R", bound=Response)

# a request that got no answer from the coordinator: it may have moved (or died)
_LOST = (BrokerNotAvailableError, KafkaTimeoutError, ProtocolError)


class Coordinator:
    """The coordinator of ``key`` (a group id, or with ``key_type`` TRANSACTION a
    transactional id); see the module docstring."""

    def __init__(self, cluster: Cluster, key: str, key_type: int = requests.GROUP, *,
                 own_connection: bool = True) -> None:
        self.cluster = cluster
        self.key = key
        self.key_type = key_type
        self.own_connection = own_connection
        self.node: int | None = None      # the coordinator's broker id, once found

    @property
    def known(self) -> bool:
        return self.node is not None

    def forget(self) -> None:
        """It moved (or may have): the next request finds it again."""
        self.node = None

    async def find(self) -> int:
        """The coordinator's broker id: the one found before, while the cluster still
        has that broker, else FindCoordinator (retried: ``Cluster.call``)."""
        if self.node is None or self.node not in self.cluster.brokers:
            self.node = await self.cluster.call(
                lambda: self.cluster.find_coordinator(self.key, self.key_type),
                "FindCoordinator")
        return self.node

    async def connection_id(self) -> int:
        """The connection to send to: the coordinator's own channel, or its broker's."""
        node = await self.find()
        return coordinator_channel(node) if self.own_connection else node

    async def request(self, req: Request[R], timeout: float | None = None,
                      version: int | None = None) -> R:
        """``req`` to the coordinator, once. A lost connection, a timeout or an answer
        whose top-level error says the coordinator moved (or is loading) forgets it and
        raises (``KafkaError`` for the answer)."""
        node = await self.connection_id()
        try:
            body = await self.cluster.request(node, req, version, timeout)
        except _LOST:
            self.forget()
            raise
        code = getattr(body, "error_code", 0)
        if code in COORDINATOR_CODES:
            self.forget()
            raise KafkaError(code, f"coordinator of {self.key!r}",
                             getattr(body, "error_message", None))
        return body

    async def call(self, req: Request[R], what: str = "coordinator request") -> R:
        """``request`` retried across coordinator moves and lost connections until
        ``api_timeout_ms`` (``Cluster.call``)."""
        return await self.cluster.call(lambda: self.request(req), what)
