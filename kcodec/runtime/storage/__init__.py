"""Where pulled records wait for a sinker: the store interface and its three kinds.

Every store keeps three queues -- pending (waiting, some delayed until a retry is due),
processing (claimed by a sinker under a lease) and failed (out of retries) -- and moves a
message between them only after the step before is durable:

* a puller ``append``\\s what it fetched; Kafka offsets are committed only after that;
* a sinker ``claim``\\s a batch under a lease, runs the handler, then ``retry``\\s or
  ``fail``\\s what failed (a new durable copy) and only then ``ack``\\s the batch; an ack
  is per message and final: an acknowledged message is never handed out again;
* a lease that is not renewed expires and its unacknowledged messages go back to pending.
"""

from __future__ import annotations

from typing import Any, Protocol

from kcodec.runtime.message import Message

__all__ = ["Store", "Claim", "open_store"]


class Claim:
    """Messages one sinker holds under one lease; ``refs`` name them for ``ack``."""

    __slots__ = ("lease", "refs", "messages")

    def __init__(self, lease: Any, refs: list, messages: list[Message]) -> None:
        self.lease = lease
        self.refs = refs
        self.messages = messages


class Store(Protocol):
    kind: str

    def append(self, messages: list[Message]) -> None:
        """Add ``messages`` to pending; durable (by the store's policy) on return."""

    def sync(self) -> None:
        """Make everything appended so far durable (the interval fsync policy)."""

    def needs_sync(self) -> bool:
        """Whether appended messages wait for ``sync`` before they count as durable."""

    def claim(self, limit: int) -> Claim | None:
        """Up to about ``limit`` pending messages, leased to this process; None: none due."""

    def renew(self) -> None:
        """Extend the leases this process holds."""

    def ack(self, claim: Claim, refs: list) -> None:
        """Finish ``refs`` of ``claim`` for good (done, retried as a copy, or failed)."""

    def release(self, claim: Claim) -> None:
        """Give up the lease: unacknowledged messages of ``claim`` are pending again."""

    def retry(self, messages: list[Message]) -> None:
        """Pending again once each ``not_before`` is due (a durable copy)."""

    def fail(self, messages: list[Message]) -> None:
        """Into the failed queue (a durable copy)."""

    def backlog(self) -> dict[str, int]:
        """Counts: pending, delayed (retries not yet due), processing, failed."""

    def failed_messages(self, limit: int) -> list[Message]:
        """A look at the failed queue, oldest first."""

    def requeue(self) -> int:
        """Move every failed message back to pending (attempts reset); how many."""

    def clear(self) -> int:
        """Drop every failed message; how many."""

    def close(self) -> None: ...


def open_store(settings: Any, owner: str, quick: bool = False) -> Store:
    """The store ``settings`` name (``storage``: file or redis; direct keeps its failed
    queue in a file store), for the process called ``owner`` (its writer name). ``quick``:
    for questions from an operator, a server away is an error within seconds (the
    runtime's processes wait for it minutes)."""
    if settings.storage == "redis":
        from kcodec.runtime.storage.redis import RedisStore

        return RedisStore.from_settings(settings, owner, give_up_s=2.0 if quick else 120.0)
    from kcodec.runtime.storage.file import FileStore

    return FileStore.from_settings(settings, owner)
