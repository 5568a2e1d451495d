"""One batch through the handler and into its outcome: the step sinkers and direct-mode
pullers share.

``Worker.process`` decodes values (``--decode``), runs the handler under its deadline while
the caller's ``tick`` keeps leases and group membership alive, then writes what failed --
retried copies (delayed by the backoff) or dead ones (failed queue, and the dead-letter
topic) -- and returns which records are finished. The caller acknowledges only after that.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from kcodec.runtime.dlq import DeadLetters
from kcodec.runtime.handler import Hung, Runner, decoder, plan_outcome
from kcodec.runtime.message import Message

__all__ = ["Worker", "Stats"]

log = logging.getLogger(__name__)


class Stats:
    """Counters one process reports to ``kcodec ctl status``."""

    def __init__(self) -> None:
        self.started = time.time()
        self.records = 0          # records pulled (puller) or handled (sinker, direct)
        self.done = 0
        self.retried = 0
        self.dead = 0
        self.batches = 0
        self._window: list[tuple[float, int]] = []

    def count(self, n: int) -> None:
        self.records += n
        now = time.monotonic()
        self._window.append((now, self.records))
        while len(self._window) > 2 and now - self._window[0][0] > 10:
            self._window.pop(0)

    def rate(self) -> float:
        """Records per second over the last ~10 s."""
        w = self._window
        if len(w) < 2 or time.monotonic() - w[-1][0] > 10:
            return 0.0
        dt = w[-1][0] - w[0][0]
        return (w[-1][1] - w[0][1]) / dt if dt > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"records": self.records, "done": self.done, "retried": self.retried,
                "dead": self.dead, "batches": self.batches, "rate": round(self.rate(), 1),
                "since": self.started}


class Worker:
    """Runs batches through the handler and settles them in ``store`` (and the DLQ)."""

    def __init__(self, settings: Any, handler: Callable, store: Any, stats: Stats) -> None:
        self.s = settings
        tracing = None
        if settings.client.get("tracing_enabled"):   # typed by config.client_value
            from kcodec.observe.tracing import Tracing
            tracing = Tracing(str(settings.client.get("client_id", "kcodec-run")),
                              group_id=settings.group)
        self.runner = Runner(handler, settings.handler_timeout, tracing,
                             record=settings.handle == "record")
        self.decode = decoder(settings.decode)
        self.store = store
        self.stats = stats
        self.dlq = DeadLetters(settings.dead_letter_topic, settings.producer_config()) \
            if settings.dead_letter_topic else None

    def process(self, messages: list[Message], tick: Callable[[], None]) -> list[int]:
        """Handle ``messages``; returns the indexes that are finished (done, or their
        outcome durably written). ``tick`` runs about every 50 ms while the handler works
        (and may settle the batch early: ``complete_in_hand``). Raises ``Hung`` after
        settling the batch when the handler overran its deadline: the process must then
        end (a thread cannot be stopped)."""
        errors: list[str | None] = [None] * len(messages)
        final = [False] * len(messages)
        ready: list[Message] = []
        where: Any = []
        if self.decode is None:
            # every message goes to the handler as it is (a copy of the list: the
            # handler may change its own)
            ready, where = list(messages), range(len(messages))
        else:
            for i, m in enumerate(messages):
                try:
                    m = self.decode(m)
                except ValueError as exc:
                    errors[i] = f"undecodable: {exc} (--decode {self.s.decode})"
                    final[i] = True
                    log.error("%s[%d] offset %d: %s; not handed to the handler, failed for good",
                              m.topic, m.partition, m.offset, errors[i])
                    continue
                ready.append(m)
                where.append(i)
        self._batch = (messages, errors, final, where)
        self._result: tuple[list[int], Hung | None] | None = None
        try:
            if ready:
                self.runner.start(ready)
                while self._result is None:
                    got = self._wait()
                    if got is not None:
                        self._result = self._finish(got)
                    else:
                        tick()
            else:
                self._result = self._finish([])
            finished, hung = self._result
        finally:
            self._batch = None
            self._result = None
        if hung is not None:
            raise hung
        return finished

    _batch: tuple[list[Message], list[str | None], list[bool], list[int]] | None = None

    def complete_in_hand(self) -> tuple[list[Message], list[int]] | None:
        """From ``tick`` (a revocation while the handler works): wait for the handler and
        settle the batch now, so the caller can commit it before its partitions go;
        ``process`` then returns the same outcome. None: no batch in hand."""
        if self._batch is None:
            return None
        while self._result is None:
            got = self._wait()
            if got is not None:
                self._result = self._finish(got)
        return self._batch[0], self._result[0]

    def _wait(self) -> tuple[list[str | None], Hung | None] | None:
        try:
            got = self.runner.wait(0.05)
        except Hung as exc:
            log.error("%s; the batch counts as failed and this process restarts", exc)
            assert self._batch is not None
            return [str(exc)] * len(self._batch[3]), exc
        return None if got is None else (got, None)

    def _finish(self, got: Any) -> tuple[list[int], Hung | None]:
        assert self._batch is not None
        messages, errors, final, where = self._batch
        results, hung = got if got else ([], None)
        if any(results):                # (all None: every record done, errors stay None)
            for j, e in zip(where, results, strict=False):
                errors[j] = e
        self.stats.batches += 1
        self.stats.count(len(messages))
        return self.settle(messages, errors, final), hung

    def settle(self, messages: list[Message], errors: list[str | None],
               final: list[bool]) -> list[int]:
        if not any(errors):     # the usual case: everything done
            self.stats.done += len(messages)
            return list(range(len(messages)))
        plain = [e if not f else None for e, f in zip(errors, final, strict=False)]
        out = plan_outcome(messages, plain, self.s.retries, self.s.backoff_ms, self.s.backoff_max_ms)
        dead = list(out.dead)
        for i, f in enumerate(final):
            if f:
                dead.append(messages[i]._replace(attempts=messages[i].attempts + 1,
                                                 error=errors[i], not_before=0))
        done = [i for i, e in enumerate(errors) if e is None]
        if out.retry:
            self.store.retry(out.retry)
            self.stats.retried += len(out.retry)
            log.warning("%d of %d records failed (%s); retrying after %d ms", len(out.retry),
                        len(messages), out.retry[0].error,
                        max(out.retry[0].not_before - int(time.time() * 1000), 0))
        if dead:
            why = None
            if self.dlq is not None:
                why = self.dlq.send(dead)
            if why is not None:
                dead = [m._replace(error=f"{m.error}; dead-letter topic: {why}") for m in dead]
            self.store.fail(dead)
            self.stats.dead += len(dead)
            for m in dead[:5]:
                log.error("%s[%d] offset %d failed for good after %d attempts: %s; kept in the "
                          "failed queue%s", m.topic, m.partition, m.offset, m.attempts, m.error,
                          f" and sent to {self.dlq.topic!r}" if self.dlq is not None and why is None else "")
            if len(dead) > 5:
                log.error("... and %d more records failed for good", len(dead) - 5)
        self.stats.done += len(done)
        return list(range(len(messages)))

    def close(self) -> None:
        self.runner.close()
        if self.dlq is not None:
            self.dlq.close()
