"""The request handler pool: M threads that take requests off the channel and run the API,
and ``large_threads`` more (default 1) that take only the channel's large requests, so that a
flood of big requests holds up none of the M.

``handle(request)`` (the broker's API dispatch) returns the answer -- response bytes,
``NO_RESPONSE`` or ``CLOSE`` -- or a ``concurrent.futures.Future`` of one when the answer
is delayed (a long-polling fetch, a join waiting for the rebalance): the request's future is
then completed when that one is, and the handler thread is free for other work meanwhile.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kcodec.broker.network.channel import CLOSE, Request, RequestChannel

__all__ = ["HandlerPool", "chain", "run_handler"]

log = logging.getLogger(__name__)


def _answer(dst: concurrent.futures.Future, value: Any) -> None:
    """Hand the answer to the processor; a request whose connection has gone meanwhile
    (its future cancelled: the client left, the node is stopping) has nobody to answer."""
    try:
        dst.set_result(value)
    except concurrent.futures.InvalidStateError:
        pass


def run_handler(handle: Callable[[Request], Any], req: Request) -> Any:
    """``handle(req)``; a handler that raises is logged and its connection closed."""
    try:
        return handle(req)
    except Exception:
        log.exception("kcodec broker: handling API %d v%d failed", req.api_key, req.api_version)
        return CLOSE


def chain(src: concurrent.futures.Future, dst: concurrent.futures.Future) -> None:
    """Complete ``dst`` with ``src``'s answer when it has one (CLOSE if it failed)."""
    def done(f: concurrent.futures.Future) -> None:
        try:
            value = f.result()
        except Exception:
            log.exception("kcodec broker: a delayed request failed")
            value = CLOSE
        _answer(dst, value)
    src.add_done_callback(done)


class HandlerPool:
    def __init__(self, channel: RequestChannel, handle: Callable[[Request], Any], threads: int,
                 name: str, large_threads: int = 1) -> None:
        self.channel = channel
        self.handle = handle
        self._n_small = threads
        self._n_large = large_threads
        self._threads = [threading.Thread(target=self._run, args=(i, i >= threads),
                                          name=(f"{name}-handler-{i}" if i < threads
                                                else f"{name}-large-handler-{i - threads}"),
                                          daemon=True)
                         for i in range(threads + large_threads)]
        # seconds each thread spent waiting for a request (one writer each: exact sums), and
        # since when it waits now (None: busy); the large-request threads are not counted
        self.idle = [0.0] * (threads + large_threads)
        self.waiting: list[float | None] = [None] * (threads + large_threads)

    def idle_seconds(self) -> float:
        """The handlers' time spent waiting for requests so far, the current waits too."""
        now = time.monotonic()
        n = self._n_small
        return (sum(self.idle[:n])
                + sum(now - w for w in list(self.waiting)[:n] if w is not None))

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def _run(self, i: int, large: bool = False) -> None:
        idle = self.idle
        while True:
            t0 = self.waiting[i] = time.monotonic()
            req = self.channel.take(large=large)
            self.waiting[i] = None
            idle[i] += time.monotonic() - t0
            if req is None:
                return
            answer = run_handler(self.handle, req)
            if isinstance(answer, concurrent.futures.Future):
                chain(answer, req.future)
            else:
                _answer(req.future, answer)

    def stop(self) -> None:
        self.channel.shutdown(self._n_small, self._n_large)
        for t in self._threads:
            t.join(5)
