"""The request handler pool: M threads that take requests off the channel and run the API.

``handle(request)`` (the broker's API dispatch) returns the answer -- response bytes,
``NO_RESPONSE`` or ``CLOSE`` -- or a ``concurrent.futures.Future`` of one when the answer
is delayed (a long-polling fetch, a join waiting for the rebalance): the request's future is
then completed when that one is, and the handler thread is free for other work meanwhile.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from typing import Any, Callable

from kcodec.broker.network.channel import CLOSE, Request, RequestChannel

__all__ = ["HandlerPool"]

log = logging.getLogger("kcodec.broker")


def _answer(dst: concurrent.futures.Future, value: Any) -> None:
    """Hand the answer to the processor; a request whose connection has gone meanwhile
    (its future cancelled: the client left, the node is stopping) has nobody to answer."""
    try:
        dst.set_result(value)
    except concurrent.futures.InvalidStateError:
        pass


def _chain(src: concurrent.futures.Future, dst: concurrent.futures.Future) -> None:
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
                 name: str) -> None:
        self.channel = channel
        self.handle = handle
        self._threads = [threading.Thread(target=self._run, name=f"{name}-handler-{i}", daemon=True)
                         for i in range(threads)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def _run(self) -> None:
        while True:
            req = self.channel.take()
            if req is None:
                return
            try:
                answer = self.handle(req)
            except Exception:
                log.exception("kcodec broker: handling API %d v%d failed", req.api_key, req.api_version)
                answer = CLOSE
            if isinstance(answer, concurrent.futures.Future):
                _chain(answer, req.future)
            else:
                _answer(req.future, answer)

    def stop(self) -> None:
        self.channel.shutdown(len(self._threads))
        for t in self._threads:
            t.join(5)
