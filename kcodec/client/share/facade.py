"""The share consumer's facades: ``AsyncShareConsumer`` (asyncio) and ``ShareConsumer``
(blocking, safe to share between threads).

A share consumer joins a share group (membership.py), and its fetcher (fetcher.py) keeps
records that the brokers acquired for it in a buffer; ``poll`` hands them out, and the
engine (engine.py) keeps what was handed out until it is acknowledged. Each record
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
from collections.abc import Callable, Mapping
from typing import Any

from kcodec.client.errors import ClientClosedError, KafkaTimeoutError, ShareStateError
from kcodec.client.net.loop import GRACE, LoopThread, shared_loop
from kcodec.client.share.acks import AcknowledgeType
from kcodec.client.share.columns import ShareColumns
from kcodec.client.share.config import ShareConsumerConfig
from kcodec.client.share.engine import Results, ShareEngine
from kcodec.client.share.fetcher import ShareRecord
from kcodec.client.structs import TopicPartition

__all__ = ["ShareConsumer", "AsyncShareConsumer", "ShareStateError"]


class AsyncShareConsumer:
    """The asyncio share consumer::

        async with AsyncShareConsumer("jobs", bootstrap_servers=..., group_id="workers") as c:
            for record in await c.poll(1.0):
                handle(record)            # accepted at the next poll (implicit mode)
    """

    def __init__(self, *topics: str, config: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> None:
        self.config, self._topics = _settings(topics, config, kwargs)
        self._eng: ShareEngine | None = None

    @property
    def engine(self) -> ShareEngine:
        """The started share consumer's engine (engine.py), which the blocking
        ``ShareConsumer`` drives too."""
        if self._eng is None:
            raise ClientClosedError("the share consumer is not started: await start() or use "
                                    "async with")
        return self._eng

    async def start(self) -> AsyncShareConsumer:
        """Start the consumer (``async with`` does it) and join with the topics given."""
        if self._eng is None:
            self._eng = ShareEngine(self.config, asyncio.get_running_loop())
        if self._topics:
            await self.subscribe(self._topics)
        return self

    async def subscribe(self, topics: str | list[str]) -> None:
        """Read ``topics`` as a member of the share group (replacing the subscription)."""
        await self.engine.subscribe([topics] if isinstance(topics, str) else list(topics))

    def subscription(self) -> list[str]:
        """The topics subscribed to."""
        return list(self.engine.subscription)

    def assignment(self) -> set[TopicPartition]:
        """The partitions the share group's coordinator gave this member (other members
        may read them too)."""
        return set(self.engine.member.assignment)

    @property
    def member_id(self) -> str:
        """This member's id in the share group (made by the client, as KIP-932 says)."""
        return self.engine.member.member_id

    @property
    def acquisition_lock_timeout_ms(self) -> int:
        """The lock duration the brokers last gave (-1 before the first fetch)."""
        return self.engine.fetcher.lock_timeout_ms

    async def poll(self, timeout: float = 0.0, max_records: int | None = None) -> list[ShareRecord]:
        """The next records (at most ``max_records``, default ``max_poll_records``), waiting
        up to ``timeout`` seconds for some."""
        eng = self.engine
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
        eng = self.engine
        eng.before_poll()
        await eng.follow_assignment()
        return await self._until(eng.take_columns, timeout)

    async def _until(self, take: Callable[[], list], timeout: float,
                     after_wait: Callable[[], None] | None = None) -> list:
        """``take()`` until it gives something or ``timeout`` passes, waiting for fetched
        answers in between (and following assignment changes)."""
        eng = self.engine
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
        self.engine.acknowledge(record, kind)

    async def commit_sync(self, timeout: float | None = None) -> Results:
        """Send the acknowledgements now and wait: {partition: None or the error}."""
        fut = self.engine.commit()
        limit = self.config.api_timeout_ms / 1000 if timeout is None else timeout
        try:
            return await asyncio.wait_for(asyncio.wrap_future(fut), limit)
        except asyncio.TimeoutError:
            raise KafkaTimeoutError(f"the acknowledgements were not answered within {limit} s") \
                from None

    def commit_async(self) -> asyncio.Future:
        """Send the acknowledgements now; the future gives {partition: None or the error}."""
        return asyncio.wrap_future(self.engine.commit())

    def set_acknowledgement_commit_callback(
            self, callback: Callable[[dict[TopicPartition, list[int]], BaseException | None], Any]
            | None) -> None:
        """``callback(offsets by partition, error or None)`` after each acknowledgement
        answer (on the client's loop: keep it short)."""
        self.engine.fetcher.acks.on_commit = callback

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
        self._engine = self._async.engine
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

