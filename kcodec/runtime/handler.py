"""The user's handler: finding it, calling it under a deadline, reading its answer, and what
happens to each record after (done, retried later, or failed for good).

A handler takes a list of ``kcodec.runtime.Message`` and returns one result per message:
``True`` (done), ``False`` (failed) or an exception instance (failed, for that reason);
raising ``Failed({index: reason, ...})`` fails only the records it names, any other
exception fails the whole batch. A per-record handler (``@per_record``, or ``--handle
record``) takes one message and returns nothing: raising fails that record alone. Either
may be a coroutine function. It runs in a worker thread of its own (a coroutine on that thread's event loop),
so the process keeps its group membership, leases and control socket alive meanwhile.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import inspect
import json
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from kcodec.runtime.message import Message

__all__ = ["load_handler", "Runner", "Outcome", "plan_outcome", "decoder", "per_record",
           "Failed", "is_per_record"]

PER_RECORD = "__kcodec_per_record__"


def per_record(fn: Callable) -> Callable:
    """Decorator: ``fn`` takes one message (``def handle(msg) -> None``); raising fails
    that record alone (retried, then failed for good), returning means done."""
    setattr(fn, PER_RECORD, True)
    return fn


def is_per_record(fn: Callable) -> bool:
    return bool(getattr(fn, PER_RECORD, False))


class Failed(Exception):
    """Raised by a batch handler: the records at the indexes of ``failures`` failed (each
    with its reason: text or an exception), every other record of the batch is done."""

    def __init__(self, failures: dict[int, Any]) -> None:
        super().__init__(f"{len(failures)} records failed")
        self.failures = dict(failures)

log = logging.getLogger(__name__)


def load_handler(spec: str | Callable) -> Callable:
    """``"package.module:function"`` (or ``module:object.method``) -> the callable."""
    if callable(spec):
        return spec
    if not isinstance(spec, str) or ":" not in spec:
        raise ValueError(f"handler must be MODULE:FUNCTION (e.g. myapp.jobs:handle), got {spec!r}")
    mod_name, _, attr = spec.partition(":")
    if "." not in sys.path and "" not in sys.path:
        sys.path.insert(0, "")   # as `python -m` does: modules beside the working directory
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise ValueError(f"handler {spec!r}: cannot import module {mod_name!r}: {exc}") from None
    obj: Any = mod
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"handler {spec!r}: module {mod_name!r} has no {attr!r}") from None
    if not callable(obj):
        raise ValueError(f"handler {spec!r} is a {type(obj).__name__}, not a function")
    return obj


def handler_ref(handler: str | Callable) -> str:
    """A name a spawned process can import ``handler`` by; a ValueError for one it cannot."""
    if isinstance(handler, str):
        load_handler(handler)
        return handler
    mod = getattr(handler, "__module__", None)
    qual = getattr(handler, "__qualname__", "")
    if not mod or "<" in qual:
        raise ValueError(f"the handler {handler!r} must be a module-level function: each "
                         "runtime process imports it again by name")
    if mod == "__main__":
        import __main__

        path = getattr(__main__, "__file__", None)
        if not path:
            raise ValueError("a handler defined in an interactive session cannot be imported "
                             "by the runtime's processes: put it in a module")
        return f"file:{path}:{qual}"
    return f"{mod}:{qual}"


def load_ref(ref: str) -> Callable:
    if ref.startswith("file:"):
        import importlib.util

        path, _, qual = ref[5:].rpartition(":")
        spec = importlib.util.spec_from_file_location("__kcodec_handler__", path)
        if spec is None or spec.loader is None:
            raise ValueError(f"cannot load the handler's file {path!r}")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["__kcodec_handler__"] = mod
        spec.loader.exec_module(mod)
        obj: Any = mod
        for part in qual.split("."):
            obj = getattr(obj, part)
        return obj
    return load_handler(ref)


# ---------------------------------------------------------------------- decoding
def decoder(kind: str) -> Callable[[Message], Message] | None:
    """What ``--decode`` does to a message's value before the handler sees it (None: raw).
    Raises ValueError with the reason for a value that does not decode."""
    if kind == "raw":
        return None

    def utf8(m: Message) -> Message:
        if m.value is None:
            return m
        try:
            return m._replace(value=m.value.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ValueError(f"value is not UTF-8 (byte {exc.start})") from None

    def as_json(m: Message) -> Message:
        if m.value is None:
            return m
        try:
            return m._replace(value=json.loads(m.value))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"value is not JSON ({exc})") from None

    return utf8 if kind == "utf8" else as_json


# ---------------------------------------------------------------------- outcomes
class Outcome:
    """What becomes of a batch: ``done`` (indexes), ``retry`` and ``dead`` (new copies)."""

    __slots__ = ("done", "retry", "dead")

    def __init__(self) -> None:
        self.done: list[int] = []
        self.retry: list[Message] = []
        self.dead: list[Message] = []


def backoff_ms(attempts: int, base: int, cap: int) -> int:
    """Delay before delivery number ``attempts + 1``: base, 2 x base, 4 x base ... capped."""
    return int(min(base * (2 ** max(attempts - 1, 0)), cap))


def plan_outcome(messages: list[Message], errors: list[str | None], retries: int,
                 base_ms: int, cap_ms: int, final: bool = False) -> Outcome:
    """``errors[i]`` None: done; else a retry (attempts + 1, not before the backoff) while
    ``retries`` allow and the failure is not ``final``, else dead (failed queue, DLQ)."""
    out = Outcome()
    now = int(time.time() * 1000)
    for i, (m, err) in enumerate(zip(messages, errors, strict=False)):
        if err is None:
            out.done.append(i)
            continue
        n = m.attempts + 1
        copy = m._replace(attempts=n, error=err[:2000])
        if final or n > retries:
            out.dead.append(copy._replace(not_before=0))
        else:
            out.retry.append(copy._replace(not_before=now + backoff_ms(n, base_ms, cap_ms)))
    return out


# ---------------------------------------------------------------------- calling
class Hung(Exception):
    """The handler is still running past its deadline."""


class Runner:
    """Runs the handler on a worker thread; ``start`` a batch, then ``wait`` for it."""

    def __init__(self, handler: Callable, timeout: float, tracing: Any = None,
                 record: bool = False) -> None:
        if record or is_per_record(handler):
            handler = _each(handler)
        self.handler = handler
        self.tracing = tracing          # kcodec.observe.tracing.Tracing: a span per batch
        self.timeout = timeout
        self.is_async = inspect.iscoroutinefunction(handler) or \
            inspect.iscoroutinefunction(type(handler).__call__)
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kcodec-handler")
        self._loop: asyncio.AbstractEventLoop | None = None
        if self.is_async:
            self._loop = asyncio.new_event_loop()
            threading.Thread(target=self._loop.run_forever, name="kcodec-handler-loop",
                             daemon=True).start()
        self._fut: concurrent.futures.Future | None = None
        self._started = 0.0
        self._n = 0
        self.hung = False

    @property
    def busy(self) -> bool:
        return self._fut is not None

    def start(self, records: list) -> None:
        self._n = len(records)
        self._started = time.monotonic()
        if self._loop is not None:
            self._fut = asyncio.run_coroutine_threadsafe(self._call_async(records), self._loop)
        elif self.tracing is not None:
            self._fut = self._pool.submit(self._call_traced, records)
        else:
            self._fut = self._pool.submit(self.handler, records)

    def _call_traced(self, records: list) -> Any:
        with self.tracing.process_batch(records):
            return self.handler(records)

    async def _call_async(self, records: list) -> Any:
        if self.tracing is not None:
            with self.tracing.process_batch(records):
                return await asyncio.wait_for(self.handler(records), self.timeout)
        return await asyncio.wait_for(self.handler(records), self.timeout)

    def overdue(self) -> bool:
        # an async handler is cancelled at its deadline; one that blocks its loop gets 2 s more
        extra = 2.0 if self._loop is not None else 0.0
        return self._fut is not None and time.monotonic() - self._started > self.timeout + extra

    def wait(self, timeout: float) -> list[str | None] | None:
        """Per-record errors once the batch ended (None: still running). Raises ``Hung``
        once the deadline has passed: the batch is failed and this process must end
        (a thread cannot be stopped)."""
        fut = self._fut
        assert fut is not None
        try:
            result = fut.result(max(timeout, 0))
        except (concurrent.futures.TimeoutError, asyncio.TimeoutError, TimeoutError):
            # (one class since 3.11) not done yet, or the async handler's own deadline
            if not fut.done():
                if self.overdue():
                    self.hung = True
                    raise Hung(f"the handler ran past its deadline of {self.timeout:g} s "
                               f"(--handler-timeout) on a batch of {self._n}") from None
                return None
            if not self.is_async:     # a sync handler raised TimeoutError itself
                return self._raised(fut.exception())
            self._fut = None
            err = (f"the handler ran past its deadline of {self.timeout:g} s "
                   "(--handler-timeout) and was cancelled")
            log.error("%s; the batch of %d counts as failed", err, self._n)
            return [err] * self._n
        except Failed as exc:          # the handler failed the records it names
            self._fut = None
            return check_results(_named(exc, self._n), self._n)
        except BaseException as exc:   # the handler raised: the whole batch failed
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            return self._raised(exc)
        self._fut = None
        return check_results(result, self._n)

    def _raised(self, exc: BaseException | None) -> list[str | None]:
        self._fut = None
        text = f"{type(exc).__name__}: {exc}"
        log.error("the handler raised on a batch of %d records; the batch counts as "
                  "failed:\n%s%s", self._n,
                  "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
                  if exc is not None else "", _hint(exc))
        return [text] * self._n

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)


def _good(r: Any) -> bool:
    return r is True or r is False or isinstance(r, BaseException)


def _reason(r: Any) -> str | None:
    if r is True:
        return None
    if r is False:
        return "the handler returned False"
    return f"{type(r).__name__}: {r}"


def _hint(exc: BaseException | None) -> str:
    """What to do when a handler of one record was given a batch: it reads a record's
    attribute off the list (``msg.value``), the usual first mistake."""
    if isinstance(exc, AttributeError) and str(exc).startswith("'list' object has no attribute"):
        return ("\n(the handler was given a list of records, as --handle batch does; for a "
                "handler of one record a call, run with --handle record or decorate it with "
                "@kcodec.runtime.per_record)")
    return ""


def check_results(result: Any, n: int) -> list[str | None]:
    """The handler's answer as per-record errors; a malformed one fails the whole batch."""
    if type(result) is list and len(result) == n and result.count(True) == n and \
            (not n or set(map(type, result)) == {bool}):
        return [None] * n       # all True (the usual answer), checked at C level
    if isinstance(result, (list, tuple)) and len(result) == n and all(_good(r) for r in result):
        return [_reason(r) for r in result]
    if not isinstance(result, (list, tuple)):
        why = f"returned {type(result).__name__}, not a list of one True/False per record"
    elif len(result) != n:
        why = f"returned {len(result)} results for {n} records"
    else:
        bad = next(r for r in result if not _good(r))
        why = (f"returned {bad!r} among its results, where only True, False or an exception "
               "count")
    err = f"the handler {why}"
    log.error("%s; the batch of %d counts as failed", err, n)
    return [err] * n


def _named(exc: Failed, n: int) -> list[Any]:
    """``Failed``'s indexes as a result list (one out of range fails the whole batch)."""
    out: list[Any] = [True] * n
    for i, why in exc.failures.items():
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < n:
            return [RuntimeError(f"the handler raised Failed naming index {i!r} of a batch "
                                 f"of {n}")] * n
        out[i] = why if isinstance(why, BaseException) else RuntimeError(str(why))
    return out


def _each(fn: Callable) -> Callable:
    """A per-record handler as a batch handler: one call a record, an exception fails only
    that record (its traceback logged once per batch for the first)."""
    def report(records: list, errors: list[Any]) -> list[Any]:
        failed = [e for e in errors if e is not True]
        if failed:
            first = failed[0]
            log.error("the handler raised on %d of %d records; those fail (retried as "
                      "--retries allows). The first:\n%s", len(failed), len(records),
                      "".join(traceback.format_exception(type(first), first,
                                                         first.__traceback__)).rstrip())
        return errors

    if inspect.iscoroutinefunction(fn):
        async def each_async(records: list) -> list[Any]:
            out: list[Any] = []
            for r in records:
                try:
                    await fn(r)
                    out.append(True)
                except Exception as exc:
                    out.append(exc)
            return report(records, out)
        return each_async

    def each(records: list) -> list[Any]:
        out: list[Any] = []
        for r in records:
            try:
                fn(r)
                out.append(True)
            except Exception as exc:
                out.append(exc)
        return report(records, out)
    return each
