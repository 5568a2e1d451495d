"""The share consumer's engine, what both facades (facade.py) share: the config, the
connections, the membership (membership.py), the fetcher (fetcher.py), and the records
delivered and not yet acknowledged, settled into acknowledgements at a poll, a commit or
``close``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Sequence
from typing import Any

from kcodec.client.errors import ClientClosedError, ShareStateError
from kcodec.client.net.cluster import Cluster
from kcodec.client.share.acks import Acknowledgements, AcknowledgeType, Batch, batches, runs
from kcodec.client.share.columns import ShareColumns
from kcodec.client.share.config import ShareConsumerConfig
from kcodec.client.share.fetcher import ShareFetcher, ShareRecord
from kcodec.client.share.membership import ShareGroupMember
from kcodec.client.structs import TopicPartition

__all__ = ["ShareEngine", "Results"]

Results = dict[TopicPartition, BaseException | None]


class ShareEngine:
    """What both facades share: config, connections, membership, fetcher, and the records
    delivered and not yet acknowledged (guarded by ``lock``; the blocking facade calls from
    any thread)."""

    def __init__(self, config: ShareConsumerConfig, loop: asyncio.AbstractEventLoop) -> None:
        assert config.group_id is not None
        self.config = config
        self.loop = loop
        self.cluster = Cluster(config)
        self.member = ShareGroupMember(self.cluster, config.group_id)
        self.fetcher = ShareFetcher(config, loop, self.cluster, self.member)
        self.explicit = config.share_acknowledgement_mode == "explicit"
        self.lock = threading.RLock()
        # partition -> offset -> None (delivered, not acknowledged) or the type given
        self.delivered: dict[TopicPartition, dict[int, int | None]] = {}
        # implicit mode: the offsets the last poll handed out, by partition
        self.last_poll_spans: list[tuple[TopicPartition, Sequence[int]]] = []
        self.subscription: list[str] = []
        self.closed = False
        self.last_poll = time.monotonic()
        self.member.since_poll = lambda: time.monotonic() - self.last_poll
        self.member.max_poll_interval = config.max_poll_interval_ms / 1000
        self.member.on_stale = self._left_for_want_of_polls

    # ------------------------------------------------------------------ acknowledgements
    def acknowledge(self, record: Any, kind: AcknowledgeType | int) -> None:
        if not self.explicit:
            raise ShareStateError("acknowledge() is for share_acknowledgement_mode='explicit'; "
                                  "in implicit mode the records of a poll are accepted at the "
                                  "next poll or commit")
        try:
            kind = AcknowledgeType(kind)
        except ValueError:
            raise ValueError(f"unknown acknowledge type {kind!r}: ACCEPT, RELEASE, REJECT "
                             "or RENEW") from None
        if kind == AcknowledgeType.GAP:
            raise ValueError("GAP is for offsets without a record; acknowledge a record with "
                             "ACCEPT, RELEASE, REJECT or RENEW")
        tp = TopicPartition(record.topic, record.partition)
        with self.lock:
            offs = self.delivered.get(tp)
            if offs is None or record.offset not in offs or \
                    offs[record.offset] not in (None, AcknowledgeType.RENEW):
                raise ShareStateError(f"{tp.topic}-{tp.partition} offset {record.offset} was not "
                                      "delivered to this consumer, or was acknowledged already")
            offs[record.offset] = int(kind)

    def _settle(self, implicit: bool) -> dict[TopicPartition, list[Batch]]:
        """The acknowledgements to send, taken out of what is delivered: implicit mode,
        the last poll's records (ACCEPT); explicit, what was acknowledged (a RENEW stays
        delivered: the record still needs a final type)."""
        acks = Acknowledgements()
        with self.lock:
            if implicit:
                spans, self.last_poll_spans = self.last_poll_spans, []
                for tp, offsets in spans:
                    acks.add(tp, runs(offsets, AcknowledgeType.ACCEPT))
                return acks.take()
            for tp, offs in list(self.delivered.items()):
                given = [(off, kind) for off, kind in offs.items() if kind is not None]
                if not given:
                    continue
                acks.add(tp, batches(dict(given)))
                for off, kind in given:
                    if kind == AcknowledgeType.RENEW:
                        offs[off] = None
                    else:
                        del offs[off]
                if not offs:
                    del self.delivered[tp]
        return acks.take()

    def _left_for_want_of_polls(self) -> None:
        """The member left (max_poll_interval_ms passed without a poll): the broker gave
        back what it had acquired, so nothing fetched or handed out can be acknowledged
        any more. Fetched records are dropped; those handed out are forgotten (another
        member gets them; an acknowledge() of one now says it was not delivered here)."""
        self.fetcher.drop_unpolled()
        with self.lock:
            self.last_poll_spans = []
            self.delivered.clear()

    def before_poll(self) -> None:
        if self.closed:
            raise ClientClosedError("the share consumer is closed")
        self.last_poll = time.monotonic()
        err = self.fetcher.error
        if err is not None:
            self.fetcher.error = None
            raise err
        if self.explicit:
            with self.lock:
                left = sum(1 for offs in self.delivered.values() for k in offs.values()
                           if k is None)
            if left:
                raise ShareStateError(f"{left} records of the last poll are not acknowledged: "
                                      "acknowledge each (ACCEPT, RELEASE, REJECT) before polling "
                                      "again")
        acks = self._settle(implicit=not self.explicit)
        if acks:
            self.fetcher.acks.queue(acks)
            self.fetcher.kick()

    def took(self, spans: list[tuple[TopicPartition, Sequence[int]]]) -> None:
        with self.lock:
            if not self.explicit:
                self.last_poll_spans += spans
                return
            for tp, offsets in spans:
                d = self.delivered.setdefault(tp, {})
                for off in offsets:
                    d[off] = None

    def take_columns(self) -> list[ShareColumns]:
        """poll_columns: implicit mode only (a row has no object to acknowledge)."""
        if self.explicit:
            raise ShareStateError("poll_columns is for share_acknowledgement_mode='implicit' "
                                  "(the rows of a poll are accepted at the next poll or commit)")
        f = self.fetcher
        if not f.columns:
            if self.last_poll_spans or any(d.pos for d in list(f.buffer)):
                raise ShareStateError("a share consumer polls records or columns, not both: "
                                      "poll_columns before the first poll")
            f.columns = True
        out, spans = f.take_columns()
        if out:
            self.took(spans)
        return out

    def take_records(self, n: int) -> list[ShareRecord]:
        if self.fetcher.columns:
            raise ShareStateError("a share consumer polls records or columns, not both: this "
                                  "one polled columns")
        out, spans = self.fetcher.take(n, self.config.check_crcs)
        if out:
            self.took(spans)
        return out

    def commit(self) -> concurrent.futures.Future:
        """Send every acknowledgement made so far (implicit: the last poll's records)."""
        if self.closed:
            raise ClientClosedError("the share consumer is closed")
        acks = self._settle(implicit=not self.explicit)
        # those waiting for the next fetch go now too
        for tp, waiting in self.fetcher.acks.take_pending().items():
            acks[tp] = sorted(waiting + acks.get(tp, []), key=lambda b: b[0])
        return self.fetcher.acks.commit(acks)

    # ------------------------------------------------------------------ membership
    async def subscribe(self, topics: list[str]) -> None:
        self.subscription = sorted(set(topics))
        self.last_poll = time.monotonic()
        await self.member.join(self.subscription, self.config.api_timeout_ms / 1000)
        self.fetcher.start_loops()

    async def follow_assignment(self) -> None:
        """After a heartbeat brought a new assignment: loops for the new leaders."""
        if self.member.changed.is_set():
            self.member.changed.clear()
            self.fetcher.start_loops()

    async def close(self) -> None:
        if self.closed:
            return
        acks = self._settle(implicit=not self.explicit)
        released: dict[TopicPartition, list[Batch]] = {}
        with self.lock:               # explicit: delivered, never acknowledged: back to others
            for tp, offs in self.delivered.items():
                left = sorted(o for o, kind in offs.items() if kind is None)
                if left:
                    released[tp] = runs(left, AcknowledgeType.RELEASE)
            self.delivered.clear()
        for tp, unpolled in self.fetcher.drop_unpolled().items():
            if unpolled:
                released[tp] = released.get(tp, []) + runs(sorted(unpolled),
                                                           AcknowledgeType.RELEASE)
        self.fetcher.acks.queue(acks)
        self.fetcher.acks.queue(released)
        self.closed = True
        await self.fetcher.close()
        await self.member.leave()
        await self.cluster.close()
