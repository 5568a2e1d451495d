"""The consumer's assignment and where each of its partitions stands.

    PartitionState     position (the next record to hand out), fetch position (the next
                       offset to fetch), high watermark, paused, and an epoch: what a
                       fetch answer and a buffered blob must match to count. Epochs come
                       from one counter per consumer, so a seek and a new state (a
                       partition revoked and given back) each get one never used before:
                       an answer to a Fetch sent for the state a rebalance replaced can
                       never pass for an answer to its successor
    SubscriptionState  the subscribed topics, the assignment (a PartitionState per
                       partition), the rebalance listener, the partitions without a
                       committed offset under ``auto_offset_reset="none"``, and the records
                       an iterator holds but has not handed out

One lock guards it; the fetcher's buffer shares the lock (kcodec.client.consumer.fetcher),
so an assignment change or a seek drops stale buffered data in the same step.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from kcodec.client.structs import TopicPartition

__all__ = ["PartitionState", "SubscriptionState"]


class PartitionState:
    __slots__ = ("position", "fetch_position", "high_watermark", "paused", "epoch",
                 "log_start")

    def __init__(self, epoch: int = 0) -> None:
        self.position: int | None = None
        self.fetch_position: int | None = None
        self.high_watermark = -1
        self.paused = False
        self.epoch = epoch   # renewed on seek: buffered data of another epoch is stale
        self.log_start = -1   # the log start offset the last fetch reported (records-lead)


class SubscriptionState:
    """Assignment and positions (see the module docstring); methods marked so run with
    ``lock`` held by the caller."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.states: dict[TopicPartition, PartitionState] = {}
        self._epochs = itertools.count(1)
        self.subscription: list[str] = []
        # subscribe(pattern=...): the pattern as given (sent to the broker under the consumer
        # protocol) and compiled for client-side matching (classic); the subscription is
        # then the topics it matched last
        self.pattern_text: str | None = None
        self.pattern: Any = None
        self.listener: Any = None            # a RebalanceListener, or None
        self.no_offset: set[TopicPartition] = set()   # auto_offset_reset=none found no offset
        # positions are looked up once the application polls (as in Java), so a commit or
        # seek between assign() and the first poll() is honoured
        self.resolve = False
        # records an iterator took from a poll but has not handed out yet: tp -> the offset
        # of the first of them (what commits and rewinds use instead of the position)
        self.held: dict[TopicPartition, int] = {}

    def next_epoch(self) -> int:
        """An epoch no state of this consumer had before (lock held)."""
        return next(self._epochs)

    def assign(self, tps: set[TopicPartition]) -> None:
        """The assignment becomes ``tps`` (lock held): new partitions have no position
        and a new epoch, partitions kept keep theirs."""
        for tp in list(self.states):
            if tp not in tps:
                del self.states[tp]
        for tp in tps:
            if tp not in self.states:
                self.states[tp] = PartitionState(self.next_epoch())
        self.no_offset &= tps
        for tp in [tp for tp in self.held if tp not in tps]:
            del self.held[tp]
        self.resolve = False

    def seek(self, tp: TopicPartition, offset: int | None) -> None:
        """Fetch ``tp`` from ``offset`` next (lock held); ``ValueError`` if not assigned."""
        st = self.states.get(tp)
        if st is None:
            raise ValueError(f"{tp} is not assigned to this consumer")
        st.position = offset
        st.fetch_position = offset
        st.epoch = self.next_epoch()
        self.held.pop(tp, None)   # the application said where to go on
        self.no_offset.discard(tp)

    def missing(self, skip: set[TopicPartition] | frozenset = frozenset()) -> list[TopicPartition]:
        """Assigned partitions without a position (but those in ``skip``)."""
        return [tp for tp, st in self.states.items() if st.position is None and tp not in skip]

    def set_position(self, tp: TopicPartition, off: int) -> None:
        """A looked-up position for ``tp``, unless it got one meanwhile (a seek)."""
        st = self.states.get(tp)
        if st is not None and st.position is None:
            st.position = st.fetch_position = off

    def positions_to_commit(self) -> dict[TopicPartition, int]:
        """What the application consumed: positions, except where an iterator still holds
        records it has not handed out (those are not consumed yet)."""
        held = self.held
        return {tp: held.get(tp, st.position) for tp, st in self.states.items()
                if st.position is not None}
