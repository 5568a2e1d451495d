"""The consumer's facades: ``AsyncConsumer`` (asyncio) and ``Consumer`` (blocking).

Both run one engine (engine.py): a fetcher task on the client's loop keeps one Fetch in
flight per leader and buffers the raw blobs; ``poll`` decodes them in the caller's thread
(hiding control batches, dropping aborted transactions under ``read_committed``) and
advances positions; one poll's steps are written once (``_poll_steps``) and each facade
runs them its own way. Group membership (classic_group.py; consumer_group.py for KIP-848)
rejoins from ``poll`` (the rebalance driver, rebalance.py), so rebalance callbacks run in
the caller's context, in the Java client's order; heartbeats run in the background. User
hooks (``key_deserializer``, ``value_deserializer``, ``interceptors``: hooks.py) run on the
records as ``poll`` returns them, in the caller's context.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from typing import Any

from kcodec.client.config import ConsumerConfig
from kcodec.client.consumer.engine import ConsumerEngine
from kcodec.client.consumer.hooks import ConsumerHooks
from kcodec.client.consumer.list_offsets import EARLIEST, LATEST, list_offsets
from kcodec.client.consumer.rebalance import Rebalancer
from kcodec.client.errors import (
    ClientClosedError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
)
from kcodec.client.net.loop import GRACE, LoopThread, shared_loop
from kcodec.client.structs import ConsumerRecord, TopicPartition
from kcodec.errors import KcodecError

__all__ = ["Consumer", "AsyncConsumer", "RebalanceListener"]


class RebalanceListener:
    """Override what you need; methods may be plain functions or coroutines (async consumer).

    Called from ``poll`` (the blocking consumer: in the polling thread) and ``close``, in the
    Java client's order: ``on_partitions_revoked`` while the partitions are still owned and
    before they move (after auto-commit committed them); ``on_partitions_assigned`` after
    each completed rebalance (possibly empty); ``on_partitions_lost`` instead of revoked when
    the membership was lost (by default it calls ``on_partitions_revoked``).
    """

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> Any:
        """Called with the partitions taken away, while the consumer still owns them."""

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> Any:
        """Called with the partitions given, after each completed rebalance."""

    def on_partitions_lost(self, lost: list[TopicPartition]) -> Any:
        """Called instead of revoked when the membership was lost; calls
        ``on_partitions_revoked`` by default."""
        return self.on_partitions_revoked(lost)


class _Common:
    config: ConsumerConfig
    _engine: ConsumerEngine
    _rebalancer: Rebalancer
    _hooks: ConsumerHooks | None = None
    _hook_error: BaseException | None = None    # a deserializer's, raised at the next poll

    def group_metadata(self) -> Any:
        """The group, generation and member, for ``send_offsets_to_transaction``."""
        from kcodec.client.structs import ConsumerGroupMetadata

        g = self._engine.group
        if g is None:
            raise ValueError("group_metadata needs a consumer with a group_id")
        return ConsumerGroupMetadata(g.group_id, g.generation, g.member_id,
                                     self._engine.config.group_instance_id)

    def assignment(self) -> set[TopicPartition]:
        return set(self._engine.subs.states)

    def group_leader(self) -> str | None:
        """The member id of the group's leader, as the last JoinGroup told every member
        (classic protocol); None before joining, and under the consumer protocol (KIP-848),
        where the broker assigns and no member leads."""
        g = self._engine.group
        return (getattr(g, "leader_id", "") or None) if g is not None else None

    def group_protocol(self) -> str | None:
        """The group protocol in use: ``"consumer"`` (KIP-848, the broker assigns) or
        ``"classic"`` (asked for, or fallen back to where the broker lacks the consumer
        protocol); None without a group. Before the first join it says what will be tried."""
        from kcodec.client.consumer.consumer_group import ConsumerGroupMember

        g = self._engine.group
        if g is None:
            return None
        return "consumer" if isinstance(g, ConsumerGroupMember) else "classic"

    def subscription(self) -> list[str]:
        return list(self._engine.subs.subscription)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Fetch ``partition`` from ``offset`` next."""
        if offset < 0:
            raise ValueError(f"offset must be non-negative, got {offset}")
        self._engine.seek(TopicPartition(*partition), offset)

    def pause(self, *partitions: TopicPartition) -> None:
        """Fetch and return nothing of ``partitions`` until ``resume``: what was fetched of
        them and not yet returned is dropped, and fetched again from the position (the
        record after the last one returned) once they are resumed."""
        self._engine.pause([TopicPartition(*tp) for tp in partitions])

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._engine.subs.states[TopicPartition(*tp)].paused = False
        self._engine.fetcher.kick()

    def highwater(self, partition: TopicPartition) -> int:
        """The high watermark seen in the last fetch of ``partition`` (-1: none yet)."""
        st = self._engine.subs.states.get(TopicPartition(*partition))
        return st.high_watermark if st else -1

    def _check(self) -> None:
        eng = self._engine
        if eng.closed:
            raise ClientClosedError("the consumer is closed")
        if eng.subs.held:   # poll() after an iterator stopped early: hand those records out again
            eng.rewind_held()
        fetcher = eng.fetcher
        dead = fetcher.stopped()          # the fetch loop died (a bug): never silent
        if dead is not None:
            raise dead
        lost = fetcher.lost_broker() or fetcher.transport_error
        if lost is not None:
            fetcher.transport_error = None
            if eng.config.error_cb is None:
                raise lost
            eng.config.error_cb(lost)     # librdkafka's error_cb: told, and polling goes on
        if eng.fetcher.error is not None:
            err, eng.fetcher.error = eng.fetcher.error, None
            if isinstance(err, NoOffsetForPartitionError):   # ask again after this poll
                with eng.subs.lock:
                    eng.subs.no_offset.difference_update(err.partitions)
                eng.fetcher.kick()
            raise err
        stuck = fetcher.stuck_error()     # a partition that cannot move (a batch too large)
        if stuck is not None:
            raise stuck
        if self._hook_error is not None:
            err, self._hook_error = self._hook_error, None
            raise err

    def _poll_steps(self, timeout: float, max_records: int | None
                    ) -> Generator[tuple, None, dict[TopicPartition, list]]:
        """One poll, written once for both consumers; the driver does what each step asks
        its own way (awaited on the loop, or waited for in the calling thread) and gets
        what ``poll`` returns as the generator's value. Steps: ``("rebalance",)`` join the
        group if due; ``("commit", offsets)`` auto-commit in the background; ``("wait",
        seconds)`` wait up to that long for fetched data."""
        start = time.monotonic()
        self._check()
        self._polled()
        yield ("rebalance",)
        self._resolve_positions()
        eng = self._engine
        if self._auto_commit_due():
            eng.last_commit = time.monotonic()
            yield ("commit", self._consumed())
        n = max_records or self.config.max_poll_records
        deadline = time.monotonic() + timeout
        while True:
            out = eng.fetcher.take(n)
            if out and self._hooks is not None:
                out = self._deliver(out)
            if out:
                return self._after_poll(start, out)
            left = deadline - time.monotonic()
            if left <= 0:
                return self._after_poll(start, {})
            yield ("wait", min(left, 0.1))
            self._check()
            if self._rebalancer.due():  # return early: the next poll rejoins the group
                return self._after_poll(start, {})

    def _deliver(self, out: dict[TopicPartition, list]) -> dict[TopicPartition, list]:
        """The hooks on a poll's records (hooks.py): what ``poll`` returns; a deserializer's
        error is raised now if nothing else is left, else at the next poll."""
        assert self._hooks is not None
        polled, err = self._hooks.deliver(out, self._engine.seek)
        if err is not None:
            if not polled:
                raise err
            self._hook_error = err
        return polled

    def _no_columns(self) -> None:
        h = self._hooks
        if h is not None and (h.key is not None or h.value is not None
                              or h.interceptors is not None):
            raise ValueError("poll_columns returns the records' bytes as columns: it runs no "
                             "key_deserializer, value_deserializer or interceptors, and this "
                             "consumer has some set; use poll(), or a consumer without them")

    def _polled(self) -> None:
        g = self._engine.group
        if g is not None:
            g.last_poll = time.monotonic()

    def _after_poll(self, start: float, out: Any) -> Any:
        """What one poll returned, counted (metrics) and traced (a receive span)."""
        cluster = self._engine.cluster
        if cluster.metrics is not None:
            cluster.metrics.polled(start, time.monotonic(), out)
        if cluster.tracing is not None and out:
            cluster.tracing.receive(out)
        return out

    def metrics(self) -> dict[str, dict[str, Any]]:
        """This consumer's metrics, named as the Java client's (kcodec.client.metrics):
        ``{group: {name: value or [{"tags": {...}, "value": v}, ...]}}``."""
        cm = self._engine.cluster.metrics
        if cm is None:
            raise ValueError("metrics are off: metrics_enabled=False")
        return cm.registry.as_dict()

    def _resolve_positions(self) -> None:
        """From now on the fetcher may look up missing positions (committed, else reset)."""
        eng = self._engine
        if not eng.subs.resolve:
            eng.subs.resolve = True
            eng.fetcher.kick()

    def _consumed(self) -> dict[TopicPartition, int]:
        """What the application has consumed, read now: the auto-commit of a poll commits
        the records earlier polls returned (as Java's), not the ones this poll is about to
        return -- read when the commit ran on the client's loop, the positions could
        already include those, and a crash while handling them would lose them."""
        subs = self._engine.subs
        with subs.lock:
            return subs.positions_to_commit()

    def _auto_commit_due(self) -> bool:
        eng = self._engine
        cfg = eng.config
        return bool(eng.group is not None and cfg.enable_auto_commit and eng.subs.states
                    and time.monotonic() - eng.last_commit >= cfg.auto_commit_interval_ms / 1000)

    def _hand_out(self, polled: dict[TopicPartition, list]) -> Iterator[ConsumerRecord]:
        """Records of one poll, one at a time; a record counts as consumed once handed out
        (kafka-python's iterator semantics), so commits -- automatic, on rebalance, on
        close -- never pass a record the application did not get. Stopping early rewinds
        the partitions to the first record not handed out."""
        held = self._engine.subs.held
        for tp, recs in polled.items():
            held[tp] = recs[0].offset
        tracing = self._engine.cluster.tracing
        try:
            for tp, recs in polled.items():
                t, p = tp
                for r in recs:
                    held[tp] = r.offset + 1
                    rec = ConsumerRecord(t, p, r.offset, r.timestamp, r.timestamp_type, r.key,
                                         r.value, r.headers, r.attributes)
                    if tracing is None:
                        yield rec
                    else:       # the process span covers the application's handling
                        with tracing.process(rec):
                            yield rec
                held.pop(tp, None)   # all handed out: the position (past control batches) stands
        finally:
            if held:
                self._engine.rewind_held()


_NOT_STARTED = "the consumer is not started: await start() or use async with"


class AsyncConsumer(_Common):
    """The asyncio consumer: ``async with AsyncConsumer(...) as c: await c.poll()``."""

    def __init__(self, *topics: Any, config: Mapping[str, Any] | ConsumerConfig | None = None,
                 **kwargs: Any) -> None:
        self.config, self._topics = _settings(topics, config, kwargs)
        self._eng: ConsumerEngine | None = None
        self._hooks = self.config.hooks

    @property
    def _engine(self) -> ConsumerEngine:  # type: ignore[override]
        if self._eng is None:
            raise ClientClosedError(_NOT_STARTED)
        return self._eng

    @property
    def rebalancer(self) -> Rebalancer:
        """The started consumer's rebalance driver (rebalance.py): its engine and its
        auto-commit, which the blocking ``Consumer`` drives from the polling thread."""
        if self._eng is None:
            raise ClientClosedError(_NOT_STARTED)
        return self._rebalancer

    async def start(self) -> AsyncConsumer:
        """Connect (and subscribe to the topics given); ``async with`` calls it."""
        if self._eng is None:
            self._eng = ConsumerEngine(self.config, asyncio.get_running_loop())
            self._rebalancer = Rebalancer(self._eng, self._quiet_commit)
            self._eng.start()
        if self._topics:
            self.subscribe(self._topics)
        return self

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions, outside any group subscription."""
        self._engine.subs.subscription = []
        self._engine.set_assignment(TopicPartition(*tp) for tp in partitions)

    def subscribe(self, topics: str | list[str] | None = None,
                  listener: RebalanceListener | None = None, *, pattern: Any = None) -> None:
        """Join the group for ``topics`` (or the topics matching ``pattern``); needs
        ``group_id``."""
        eng = self._engine
        if eng.group is None:
            raise ValueError(_NO_GROUP)
        subs = eng.subs
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe takes topics or pattern=..., one of the two")
        if pattern is not None:
            # consumer protocol: the broker matches it (RE2/J); classic: matched here
            text = pattern.pattern if isinstance(pattern, re.Pattern) else pattern
            if not isinstance(text, str) or not text:
                raise ValueError(f"a subscription pattern is a non-empty string or "
                                 f"re.Pattern, not {pattern!r}")
            subs.pattern_text = text
            subs.pattern = pattern if isinstance(pattern, re.Pattern) else None
            subs.subscription = []
        elif topics is not None:
            subs.pattern_text = subs.pattern = None
            subs.subscription = [topics] if isinstance(topics, str) else list(topics)
        subs.listener = listener
        eng.group.need_rejoin = True

    async def _ensure_group(self) -> None:
        if self._rebalancer.due():
            await self._rebalancer.drive(self._rebalancer.rebalance())

    async def poll(self, timeout: float = 0.0, max_records: int | None = None) -> dict[TopicPartition, list]:
        """Records by partition (``kcodec.records.Record`` objects); waits up to ``timeout`` s."""
        steps = self._poll_steps(timeout, max_records)
        fetcher = self._engine.fetcher
        try:
            step = next(steps)
            while True:
                if step[0] == "rebalance":
                    await self._ensure_group()
                elif step[0] == "commit":
                    asyncio.get_running_loop().create_task(self._quiet_commit(step[1]))
                else:
                    fetcher.adata.clear()
                    await fetcher.adata.wait(step[1])
                step = next(steps)
        except StopIteration as done:
            return done.value

    async def poll_columns(self, timeout: float = 0.0) -> dict[TopicPartition, Any]:
        """Buffered records as columns per partition (see ``kcodec.records.decode_columns``)."""
        self._no_columns()
        self._check()
        self._polled()
        await self._ensure_group()
        self._resolve_positions()
        eng = self._engine
        if not eng.fetcher.buffer and timeout > 0:
            eng.fetcher.adata.clear()
            if not await eng.fetcher.adata.wait(timeout):
                return {}
        return eng.fetcher.take_columns()

    def __aiter__(self):
        return self._aiter()

    async def _aiter(self):
        while True:
            for rec in self._hand_out(await self.poll(1.0)):
                yield rec

    async def position(self, partition: TopicPartition) -> int:
        """The offset of the next record ``poll`` will return for ``partition``."""
        eng = self._engine
        tp = TopicPartition(*partition)
        if tp not in eng.subs.states:
            raise ValueError(f"{tp} is not assigned to this consumer")
        if eng.subs.states[tp].position is None:
            await eng.reset_positions(set(eng.subs.states) - {tp})
        return eng.subs.states[tp].position  # type: ignore[return-value]

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Move the partitions (default: every assigned one) to their earliest offset."""
        await self._seek_to(partitions, EARLIEST)

    async def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Move the partitions (default: every assigned one) to their end."""
        await self._seek_to(partitions, LATEST)

    async def _seek_to(self, partitions: Any, ts: int) -> None:
        tps = [TopicPartition(*tp) for tp in partitions] or list(self._engine.subs.states)
        offs = await list_offsets(self._engine.cluster, tps, ts, self._engine.read_committed)
        for tp, off in offs.items():
            self._engine.seek(tp, off)

    async def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition (None where nothing is committed)."""
        g = self._engine.group
        if g is None:
            raise ValueError("committed offsets need a group_id")
        got = await g.fetch_offsets([TopicPartition(*tp) for tp in partitions])
        return {tp: (o if o >= 0 else None) for tp, o in got.items()}

    async def commit(self, offsets: dict[TopicPartition, int] | None = None) -> None:
        """Commit ``offsets`` (default: the current positions) and wait for the broker."""
        g = self._engine.group
        if g is None:
            raise ValueError("commit needs a group_id")
        offsets = offsets if offsets is not None else self._engine.subs.positions_to_commit()
        await g.commit(offsets)
        if self._hooks is not None:
            self._hooks.committed(offsets)

    def commit_async(self, offsets: dict[TopicPartition, int] | None = None) -> asyncio.Task:
        """Commit in the background; returns the task."""
        return asyncio.get_running_loop().create_task(self.commit(offsets))

    async def _quiet_commit(self, offsets: dict[TopicPartition, int] | None = None) -> None:
        """Auto-commit: a failure is not the application's (the next one retries)."""
        try:
            await self.commit(offsets)
        except KcodecError:
            pass

    async def close(self) -> None:
        """Commit (auto-commit), revoke (listener), leave the group and disconnect."""
        eng = self._eng
        if eng is None or eng.closed:
            return
        try:
            await self._rebalancer.drive(self._rebalancer.closing())
        finally:
            if self._hooks is not None:
                self._hooks.close()

    async def __aenter__(self) -> AsyncConsumer:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class Consumer(_Common):
    """The blocking consumer.

        with Consumer("events", bootstrap_servers="127.0.0.1:9092", group_id="g",
                      auto_offset_reset="earliest") as c:
            for record in c:
                print(record.partition, record.offset, record.value)
    """

    def __init__(self, *topics: Any, config: Mapping[str, Any] | ConsumerConfig | None = None,
                 loop: LoopThread | None = None, **kwargs: Any) -> None:
        self.config, names = _settings(topics, config, kwargs)
        self._loop = loop or shared_loop()
        # one configuration, so one set of hooks (interceptor instances), for both faces
        self._async = AsyncConsumer(config=self.config)
        self._hooks = self.config.hooks
        self._loop.run(self._async.start(), 30)
        self._rebalancer = self._async.rebalancer
        self._engine = self._rebalancer.engine
        self._timeout = self.config.api_timeout_ms / 1000
        if names:
            self.subscribe(names)

    def _run(self, coro: Any, timeout: float | None = None) -> Any:
        return self._loop.run(coro, self._timeout + GRACE if timeout is None else timeout)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions, outside any group subscription."""
        self._async.assign(partitions)

    def subscribe(self, topics: str | list[str] | None = None,
                  listener: RebalanceListener | None = None, *, pattern: Any = None) -> None:
        """Join the group for ``topics`` -- or every topic whose whole name ``pattern``
        matches, now and as topics come and go -- at the next ``poll``. ``listener``'s
        methods run in the thread that polls (or closes), revocation before the partitions
        move. Under the consumer protocol the broker matches ``pattern`` (RE2/J syntax);
        under the classic protocol this client does (Python ``re``)."""
        self._async.subscribe(topics, listener, pattern=pattern)

    def _ensure_group(self) -> None:
        r = self._rebalancer
        if r.due():
            cfg = self.config   # the join's own deadline (ClassicGroupMember.join), plus grace
            r.drive_blocking(r.rebalance(), self._loop,
                             max(cfg.api_timeout_ms, 2 * cfg.session_timeout_ms) / 1000 + GRACE,
                             f"joining group {cfg.group_id!r}")

    def poll(self, timeout: float = 0.0, max_records: int | None = None) -> dict[TopicPartition, list]:
        """Records by partition (``kcodec.records.Record`` objects); waits up to ``timeout`` s."""
        steps = self._poll_steps(timeout, max_records)
        fetcher = self._engine.fetcher
        try:
            step = next(steps)
            while True:
                if step[0] == "rebalance":
                    self._ensure_group()
                elif step[0] == "commit":
                    self._loop.submit(self._rebalancer.commit(step[1]))
                else:
                    with fetcher.data_ready:
                        if not fetcher.buffer:
                            fetcher.data_ready.wait(step[1])
                step = next(steps)
        except StopIteration as done:
            return done.value

    def poll_columns(self, timeout: float = 0.0) -> dict[TopicPartition, Any]:
        """Buffered records as columns per partition (see ``kcodec.records.decode_columns``)."""
        self._no_columns()
        self._check()
        self._polled()
        eng = self._engine
        self._ensure_group()
        self._resolve_positions()
        if not eng.fetcher.buffer and timeout > 0:
            with eng.fetcher.data_ready:
                if not eng.fetcher.buffer:
                    eng.fetcher.data_ready.wait(timeout)
        return eng.fetcher.take_columns()

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Records one by one, polling as needed; unlike ``poll`` (where everything a poll
        returned counts as consumed, as in Java), only records handed out count."""
        while True:
            polled = self.poll(1.0)
            if polled:
                yield from self._hand_out(polled)

    def position(self, partition: TopicPartition) -> int:
        """The offset of the next record ``poll`` will return for ``partition``."""
        return self._run(self._async.position(partition))

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Move the partitions (default: every assigned one) to their earliest offset."""
        self._run(self._async.seek_to_beginning(*partitions))

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Move the partitions (default: every assigned one) to their end."""
        self._run(self._async.seek_to_end(*partitions))

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition (None where nothing is committed)."""
        return self._run(self._async.committed(list(partitions)))

    def commit(self, offsets: dict[TopicPartition, int] | None = None) -> None:
        """Commit ``offsets`` (default: the current positions) synchronously."""
        self._run(self._async.commit(offsets))

    def commit_async(self, offsets: dict[TopicPartition, int] | None = None,
                     callback: Callable[[BaseException | None], Any] | None = None):
        """Commit in the background; ``callback(error)`` when done. Returns a future."""
        fut = self._loop.submit(self._async.commit(offsets))
        if callback is not None:
            fut.add_done_callback(lambda f: callback(f.exception()))
        return fut

    def close(self, timeout: float | None = None) -> None:
        """Commit (auto-commit), revoke (listener, in this thread), leave the group,
        disconnect -- within ``timeout`` seconds (default ``api_timeout_ms``); past it the
        connections are dropped without the rest and ``KafkaTimeoutError`` is raised."""
        eng = self._engine
        if eng.closed:
            return
        limit = self._timeout if timeout is None else timeout
        try:
            r = self._rebalancer
            r.drive_blocking(r.closing(), self._loop, limit, "closing the consumer")
        except KafkaTimeoutError:
            self._loop.run(eng.abort(), 5)
            raise
        finally:
            if self._hooks is not None:
                self._hooks.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_NO_GROUP = ("subscribe needs a group_id (the group's members share the topics' partitions); "
             "without a group, read the partitions you choose: "
             "assign([TopicPartition(topic, partition), ...])")


def _settings(topics: tuple[Any, ...], config: Mapping[str, Any] | ConsumerConfig | None,
              kwargs: dict[str, Any]) -> tuple[ConsumerConfig, list[str]]:
    """The configuration and the topics to subscribe to from a consumer's arguments: topic
    names, then settings as keywords, ``config=``, or a dict given first (as Producer and
    Admin take it, and confluent-kafka's Consumer). A ``ConsumerConfig`` given as
    ``config=`` is used as it is (its hooks with it), with no keywords beside it."""
    if topics and isinstance(topics[0], Mapping):
        if config is not None:
            raise TypeError("the settings are given twice: as the first argument and config=")
        config, topics = topics[0], topics[1:]
    for t in topics:
        if not isinstance(t, str):
            raise TypeError(f"topics are names (str), not {type(t).__name__}: the settings "
                            "go first, or as keywords")
    if isinstance(config, ConsumerConfig):
        if kwargs:
            raise TypeError(f"settings given beside a ConsumerConfig ({', '.join(kwargs)}): "
                            "put them in it")
        cfg = config
    else:
        cfg = ConsumerConfig.from_kwargs(config, **kwargs)
    if topics and cfg.group_id is None:
        raise ValueError(f"Consumer{tuple(topics)!r}: {_NO_GROUP}")
    return cfg, list(topics)

