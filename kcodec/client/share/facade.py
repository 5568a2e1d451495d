"""The share consumer's facades: ``AsyncShareConsumer`` (asyncio) and ``ShareConsumer``
(blocking, safe to share between threads).

A share consumer joins a share group (membership.py), and its fetcher (fetcher.py) keeps
records that the brokers acquired for it in a buffer; ``poll`` hands them out. Each record
must then be acknowledged:

* implicit mode (the default): the records of a poll count as accepted at the next
  ``poll``, ``commit_sync`` or ``commit_async`` (or ``close``);
* explicit mode: ``acknowledge(record, AcknowledgeType.ACCEPT | RELEASE | REJECT | RENEW)``
  for each, before the next ``poll``; acknowledgements go to the brokers with the next
  fetch, or at once with ``commit_sync``/``commit_async``.

A record not acknowledged before its acquisition lock times out (the group's
``share.record.lock.duration.ms``, ``acquisition_lock_timeout_ms`` here) goes back to the
group and is delivered again with a higher ``delivery_count``; RENEW (KIP-1222) asks for
a new lock while the application is still at work.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Callable

from kcodec.client.errors import ClientClosedError, KafkaTimeoutError, ShareStateError
from kcodec.client.net.cluster import Cluster
from kcodec.client.net.loop import GRACE, LoopThread, shared_loop
from kcodec.client.share.acks import Acknowledgements, AcknowledgeType, Batch, batches, runs
from kcodec.client.share.columns import ShareColumns
from kcodec.client.share.config import ShareConsumerConfig
from kcodec.client.share.fetcher import ShareFetcher, ShareRecord
from kcodec.client.share.membership import ShareGroupMember
from kcodec.client.structs import TopicPartition

__all__ = ["ShareConsumer", "AsyncShareConsumer", "ShareStateError"]

Results = dict[TopicPartition, BaseException | None]


class _Engine:
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
            with self.fetcher.lock:
                for tp, batches_ in acks.items():
                    self.fetcher.pending.add(tp, batches_)
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
        with self.fetcher.lock:        # those waiting for the next fetch go now too
            for tp, waiting in self.fetcher.pending.take().items():
                acks[tp] = sorted(waiting + acks.get(tp, []), key=lambda b: b[0])
        return self.fetcher.commit(acks)

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
        with self.fetcher.lock:
            for tp, got in acks.items():
                self.fetcher.pending.add(tp, got)
            for tp, got in released.items():
                self.fetcher.pending.add(tp, got)
        self.closed = True
        await self.fetcher.close()
        await self.member.leave()
        await self.cluster.close()


class AsyncShareConsumer:
    """The asyncio share consumer::

        async with AsyncShareConsumer("jobs", bootstrap_servers=..., group_id="workers") as c:
            for record in await c.poll(1.0):
                handle(record)            # accepted at the next poll (implicit mode)
    """

    def __init__(self, *topics: str, config: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> None:
        self.config, self._topics = _settings(topics, config, kwargs)
        self._eng: _Engine | None = None

    @property
    def _engine(self) -> _Engine:
        if self._eng is None:
            raise ClientClosedError("the share consumer is not started: await start() or use "
                                    "async with")
        return self._eng

    async def start(self) -> AsyncShareConsumer:
        """Start the consumer (``async with`` does it) and join with the topics given."""
        if self._eng is None:
            self._eng = _Engine(self.config, asyncio.get_running_loop())
        if self._topics:
            await self.subscribe(self._topics)
        return self

    async def subscribe(self, topics: str | list[str]) -> None:
        """Read ``topics`` as a member of the share group (replacing the subscription)."""
        await self._engine.subscribe([topics] if isinstance(topics, str) else list(topics))

    def subscription(self) -> list[str]:
        """The topics subscribed to."""
        return list(self._engine.subscription)

    def assignment(self) -> set[TopicPartition]:
        """The partitions the share group's coordinator gave this member (other members
        may read them too)."""
        return set(self._engine.member.assignment)

    @property
    def member_id(self) -> str:
        """This member's id in the share group (made by the client, as KIP-932 says)."""
        return self._engine.member.member_id

    @property
    def acquisition_lock_timeout_ms(self) -> int:
        """The lock duration the brokers last gave (-1 before the first fetch)."""
        return self._engine.fetcher.lock_timeout_ms

    async def poll(self, timeout: float = 0.0, max_records: int | None = None) -> list[ShareRecord]:
        """The next records (at most ``max_records``, default ``max_poll_records``), waiting
        up to ``timeout`` seconds for some."""
        eng = self._engine
        eng.before_poll()
        await eng.follow_assignment()
        n = max_records or self.config.max_poll_records

        def error_seen() -> None:      # a fetch error: raised by before_poll, as at the start
            if eng.fetcher.error is not None:
                eng.before_poll()
        return await self._until(lambda: eng.take_records(n), timeout, error_seen)

    async def poll_columns(self, timeout: float = 0.0) -> list[ShareColumns]:
        """The fetched records as columns (``kcodec.records.RecordColumns``, numpy needed),
        one ``ShareColumns`` per partition range with its delivery count; whole fetched
        answers (``max_poll_records`` bounds each fetch, not this). Implicit mode only;
        a consumer polls records or columns, not both."""
        eng = self._engine
        eng.before_poll()
        await eng.follow_assignment()
        return await self._until(eng.take_columns, timeout)

    async def _until(self, take: Callable[[], list], timeout: float,
                     after_wait: Callable[[], None] | None = None) -> list:
        """``take()`` until it gives something or ``timeout`` passes, waiting for fetched
        answers in between (and following assignment changes)."""
        eng = self._engine
        deadline = time.monotonic() + timeout
        while True:
            eng.last_poll = time.monotonic()    # waiting in poll is polling
            out = take()
            if out:
                return out
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            arrived = eng.fetcher.arrived
            arrived.clear()
            if not eng.fetcher.buffer:
                try:
                    await asyncio.wait_for(arrived.wait(), min(left, 0.1))
                except asyncio.TimeoutError:
                    pass
            await eng.follow_assignment()
            if after_wait is not None:
                after_wait()

    def acknowledge(self, record: Any, kind: AcknowledgeType | int = AcknowledgeType.ACCEPT) -> None:
        """Explicit mode: how ``record`` was handled (sent at the next poll or commit)."""
        self._engine.acknowledge(record, kind)

    async def commit_sync(self, timeout: float | None = None) -> Results:
        """Send the acknowledgements now and wait: {partition: None or the error}."""
        fut = self._engine.commit()
        limit = self.config.api_timeout_ms / 1000 if timeout is None else timeout
        try:
            return await asyncio.wait_for(asyncio.wrap_future(fut), limit)
        except asyncio.TimeoutError:
            raise KafkaTimeoutError(f"the acknowledgements were not answered within {limit} s") \
                from None

    def commit_async(self) -> asyncio.Future:
        """Send the acknowledgements now; the future gives {partition: None or the error}."""
        return asyncio.wrap_future(self._engine.commit())

    def set_acknowledgement_commit_callback(
            self, callback: Callable[[dict[TopicPartition, list[int]], BaseException | None], Any]
            | None) -> None:
        """``callback(offsets by partition, error or None)`` after each acknowledgement
        answer (on the client's loop: keep it short)."""
        self._engine.fetcher.on_commit = callback

    async def close(self) -> None:
        """Send what was acknowledged (implicit: accept the last poll), release what was
        fetched but never polled (explicit: and what was polled but not acknowledged),
        close the share sessions, leave the group."""
        if self._eng is not None:
            await self._eng.close()

    async def __aenter__(self) -> AsyncShareConsumer:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class ShareConsumer:
    """The blocking share consumer; its methods may be called from several threads (one
    lock orders them; ``poll`` does not hold it while it waits)::

        with ShareConsumer("jobs", bootstrap_servers=..., group_id="workers",
                           share_acknowledgement_mode="explicit") as c:
            for record in c.poll(1.0):
                c.acknowledge(record, AcknowledgeType.ACCEPT if ok(record) else
                              AcknowledgeType.REJECT)
            c.commit_sync()
    """

    def __init__(self, *topics: str, config: Mapping[str, Any] | None = None,
                 loop: LoopThread | None = None, **kwargs: Any) -> None:
        self.config, names = _settings(topics, config, kwargs)
        self._loop = loop or shared_loop()
        self._lock = threading.RLock()
        self._async = AsyncShareConsumer(config=None, **_cfg_dict(self.config))
        self._loop.run(self._async.start(), 30)
        self._engine = self._async._engine
        self._timeout = self.config.api_timeout_ms / 1000
        if names:
            self.subscribe(names)

    def subscribe(self, topics: str | list[str]) -> None:
        """Read ``topics`` as a member of the share group (replacing the subscription)."""
        with self._lock:
            self._loop.run(self._async.subscribe(topics), self._timeout + GRACE,
                           f"joining share group {self.config.group_id!r}")

    def subscription(self) -> list[str]:
        """The topics subscribed to."""
        return self._async.subscription()

    def assignment(self) -> set[TopicPartition]:
        """The partitions the share group's coordinator gave this member (other members
        may read them too)."""
        return self._async.assignment()

    @property
    def member_id(self) -> str:
        """This member's id in the share group (made by the client, as KIP-932 says)."""
        return self._async.member_id

    @property
    def acquisition_lock_timeout_ms(self) -> int:
        """The lock duration the brokers last gave (-1 before the first fetch)."""
        return self._async.acquisition_lock_timeout_ms

    def poll(self, timeout: float = 0.0, max_records: int | None = None) -> list[ShareRecord]:
        """The next records (at most ``max_records``, default ``max_poll_records``), waiting
        up to ``timeout`` seconds for some."""
        eng = self._engine
        n = max_records or self.config.max_poll_records
        with self._lock:
            eng.before_poll()
            if eng.member.changed.is_set():
                self._loop.submit(eng.follow_assignment())
        deadline = time.monotonic() + timeout
        fetcher = eng.fetcher
        while True:
            eng.last_poll = time.monotonic()    # waiting in poll is polling
            with self._lock:
                out = eng.take_records(n)
                if out:
                    return out
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            with fetcher.data_ready:
                if not fetcher.buffer and fetcher.error is None:
                    fetcher.data_ready.wait(min(left, 0.1))
            if eng.member.changed.is_set():
                self._loop.submit(eng.follow_assignment())
            if fetcher.error is not None:
                with self._lock:
                    eng.before_poll()

    def poll_columns(self, timeout: float = 0.0) -> list[ShareColumns]:
        """The fetched records as columns (``kcodec.records.RecordColumns``, numpy needed),
        one ``ShareColumns`` per partition range with its delivery count; whole fetched
        answers. Implicit mode only; a consumer polls records or columns, not both."""
        eng = self._engine
        with self._lock:
            eng.before_poll()
            if eng.member.changed.is_set():
                self._loop.submit(eng.follow_assignment())
        deadline = time.monotonic() + timeout
        fetcher = eng.fetcher
        while True:
            eng.last_poll = time.monotonic()    # waiting in poll is polling
            with self._lock:
                out = eng.take_columns()
                if out:
                    return out
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            with fetcher.data_ready:
                if not fetcher.buffer and fetcher.error is None:
                    fetcher.data_ready.wait(min(left, 0.1))
            if eng.member.changed.is_set():
                self._loop.submit(eng.follow_assignment())
            if fetcher.error is not None:
                with self._lock:
                    eng.before_poll()

    def acknowledge(self, record: Any, kind: AcknowledgeType | int = AcknowledgeType.ACCEPT) -> None:
        """Explicit mode: how ``record`` was handled (sent at the next poll or commit)."""
        with self._lock:
            self._engine.acknowledge(record, kind)

    def commit_sync(self, timeout: float | None = None) -> Results:
        """Send the acknowledgements now and wait: {partition: None or the error}."""
        with self._lock:
            fut = self._engine.commit()
        limit = self._timeout if timeout is None else timeout
        try:
            return fut.result(limit)
        except concurrent.futures.TimeoutError:
            raise KafkaTimeoutError(f"the acknowledgements were not answered within {limit} s") \
                from None

    def commit_async(self, callback: Callable[[Results], Any] | None = None
                     ) -> concurrent.futures.Future:
        """Send the acknowledgements now; the future (and ``callback``) gets
        {partition: None or the error}."""
        with self._lock:
            fut = self._engine.commit()
        if callback is not None:
            fut.add_done_callback(lambda f: callback(f.result()))
        return fut

    def set_acknowledgement_commit_callback(
            self, callback: Callable[[dict[TopicPartition, list[int]], BaseException | None], Any]
            | None) -> None:
        """``callback(offsets by partition, error or None)`` after each acknowledgement
        answer; it runs on the client's I/O thread, so keep it short."""
        self._async.set_acknowledgement_commit_callback(callback)

    def close(self, timeout: float | None = None) -> None:
        """Acknowledge (implicit: accept the last poll), release what was never polled,
        close the share sessions and leave the group."""
        with self._lock:
            if self._engine.closed:
                return
            self._loop.run(self._async.close(), self._timeout if timeout is None else timeout,
                           "closing the share consumer")

    def __enter__(self) -> ShareConsumer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _settings(topics: tuple[Any, ...], config: Mapping[str, Any] | None,
              kwargs: dict[str, Any]) -> tuple[ShareConsumerConfig, list[str]]:
    if topics and isinstance(topics[0], Mapping):
        if config is not None:
            raise TypeError("the settings are given twice: as the first argument and config=")
        config, topics = topics[0], topics[1:]
    for t in topics:
        if not isinstance(t, str):
            raise TypeError(f"topics are names (str), not {type(t).__name__}: the settings "
                            "go first, or as keywords")
    return ShareConsumerConfig.from_kwargs(config, **kwargs), list(topics)


def _cfg_dict(cfg: ShareConsumerConfig) -> dict[str, Any]:
    import dataclasses
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}

