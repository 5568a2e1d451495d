"""The rebalance driver: the steps of one rebalance and of ``close``, in the Java client's
order, written once for both consumers.

The steps are a generator of ``("await", coroutine)`` (its result is sent back) and
``("call", listener_method, partitions)``. The async consumer runs them with ``drive``
(awaiting a coroutine listener in place); the blocking one with ``drive_blocking``
(coroutines on the client's loop, the listener in the thread that polls or closes). Either
way ``on_partitions_revoked`` runs while the consumer still owns the partitions (eager
protocols: before JoinGroup; cooperative: before they are handed over in the next round),
after auto-commit committed their positions.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Coroutine, Generator
from typing import Any

from kcodec.client.consumer.engine import ConsumerEngine
from kcodec.client.net.loop import LoopThread
from kcodec.client.structs import TopicPartition
from kcodec.observe.log import get_logger

log = get_logger(__name__)

__all__ = ["Rebalancer", "Steps"]

Steps = Generator[tuple, Any, None]


class Rebalancer:
    """One consumer's rebalances. ``commit`` is the consumer's auto-commit (quiet: a
    failure is retried by the next one), given the offsets or None for the positions."""

    def __init__(self, engine: ConsumerEngine,
                 commit: Callable[[dict[TopicPartition, int] | None],
                                  Coroutine[Any, Any, None]]) -> None:
        self.engine = engine
        self.commit = commit

    def due(self) -> bool:
        """A subscribed group member that must (re)join: the next poll rebalances."""
        eng = self.engine
        return bool(eng.group is not None and eng.subscribed and eng.group.need_rejoin)

    def rebalance(self) -> Steps:
        """The steps of one rebalance, timed, counted and logged: INFO with the generation,
        what was assigned and revoked, and how long it took; WARNING when it fails."""
        eng = self.engine
        g = eng.group
        assert g is not None
        cm = eng.cluster.metrics
        t0 = time.monotonic()
        before = set(eng.subs.states)
        log.info("group %r: rebalancing (member %r, generation %d, %d partitions owned)",
                 g.group_id, g.member_id, g.generation, len(before))
        try:
            yield from self._steps()
        except GeneratorExit:
            raise
        except BaseException as exc:
            if cm is not None:
                cm.failed_rebalances.value += 1
            log.warning("group %r: rebalance failed after %.0f ms: %s", g.group_id,
                        (time.monotonic() - t0) * 1000, exc)
            raise
        ms = (time.monotonic() - t0) * 1000
        if cm is not None:
            cm.rebalances.value += 1
            cm.rebalance_latency.record(ms)
            cm.last_rebalance = time.monotonic()
        after = set(eng.subs.states)
        log.info("group %r: joined generation %d as %r in %.0f ms: %d partitions (added %s, "
                 "revoked %s)", g.group_id, g.generation, g.member_id, ms, len(after),
                 _tps(after - before), _tps(before - after))

    def _steps(self) -> Steps:
        eng = self.engine
        auto_commit = eng.config.enable_auto_commit
        yield ("await", eng.settle_protocol())    # consumer protocol, or classic fallback
        g = eng.group
        assert g is not None
        while True:
            owned = set(eng.subs.states)
            if g.lost:   # membership lost: the partitions may already be someone else's
                g.lost = False
                if owned:
                    yield ("call", "on_partitions_lost", owned)
                    eng.set_assignment(())
                    owned = set()
            if not g.cooperative and owned:
                if auto_commit:
                    yield ("await", self.commit(None))
                yield ("call", "on_partitions_revoked", owned)
                eng.set_assignment(())
                owned = set()
            yield ("await", eng.before_join())        # a pattern's topics (classic), metadata
            joined: set[TopicPartition] | None = yield ("await", g.join(eng.subs.subscription,
                                                                        owned))
            if joined is not None:
                break
            # (classic) the join found the membership gone: lost above, then join again
        new = joined
        yield ("await", eng.after_join())         # classic: watch pattern and partitions
        revoked = owned - new
        if revoked:
            if auto_commit:
                yield ("await", self.commit(
                    {tp: o for tp, o in eng.subs.positions_to_commit().items() if tp in revoked}))
            yield ("call", "on_partitions_revoked", revoked)
            g.need_rejoin = True   # cooperative: hand them over in a second round
        eng.set_assignment(new)
        yield ("call", "on_partitions_assigned", new - owned)

    def closing(self) -> Steps:
        """The steps of ``close``: auto-commit, ``on_partitions_revoked`` (or ``_lost``) for
        what a subscription owns, then LeaveGroup and disconnect."""
        eng = self.engine
        g = eng.group
        owned = set(eng.subs.states)
        if g is not None and owned:
            lost = g.lost and eng.subscribed
            if eng.config.enable_auto_commit and not lost:
                yield ("await", self.commit(None))
            if eng.subscribed:
                yield ("call", "on_partitions_lost" if lost else "on_partitions_revoked", owned)
        yield ("await", eng.close())

    async def drive(self, steps: Steps) -> None:
        """Run ``steps`` on the loop: coroutines awaited, the listener called (and awaited,
        if it is a coroutine function)."""
        value: Any = None
        while True:
            try:
                step = steps.send(value)
            except StopIteration:
                return
            value = None
            if step[0] == "await":
                value = await step[1]
            elif self.engine.subs.listener is not None:
                r = getattr(self.engine.subs.listener, step[1])(sorted(step[2]))
                if inspect.isawaitable(r):
                    await r

    def drive_blocking(self, steps: Steps, loop: LoopThread, timeout: float,
                       what: str = "operation") -> None:
        """Run ``steps`` from the calling thread: coroutines on ``loop`` (each within
        ``timeout``), the listener right here."""
        value: Any = None
        while True:
            try:
                step = steps.send(value)
            except StopIteration:
                return
            value = None
            if step[0] == "await":
                value = loop.run(step[1], timeout, what)
            elif self.engine.subs.listener is not None:
                getattr(self.engine.subs.listener, step[1])(sorted(step[2]))


def _tps(tps: set[TopicPartition]) -> str:
    """Partitions as ``topic[0,1,2]`` per topic, for a log line."""
    by: dict[str, list[int]] = {}
    for t, p in sorted(tps):
        by.setdefault(t, []).append(p)
    return " ".join(f"{t}{ps}" for t, ps in by.items()) or "none"
