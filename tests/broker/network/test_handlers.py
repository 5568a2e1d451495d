"""The handler pool outlives requests nobody waits for any more."""

from __future__ import annotations

import concurrent.futures
import threading

from kcodec.broker.network.channel import Request, RequestChannel
from kcodec.broker.network.handlers import HandlerPool


def test_a_request_cancelled_while_handled_does_not_kill_its_handler() -> None:
    """A processor stopping (node stop) cancels the future of a request a handler is working
    on; the answer then has nowhere to go. The handler thread must carry on with the next
    request (setting the result raised InvalidStateError and ended the thread)."""
    channel = RequestChannel()
    gate = threading.Event()
    died: list[BaseException] = []
    old_hook = threading.excepthook
    threading.excepthook = lambda args: died.append(args.exc_value)   # type: ignore[assignment]

    def handle(req: Request) -> bytes:
        if req.correlation_id == 1:
            gate.wait(5)
        return b"answer-%d" % req.correlation_id

    pool = HandlerPool(channel, handle, threads=1, name="t")
    pool.start()
    try:
        first = Request(0, None, 3, 0, 1, b"")
        channel.put(first)
        first.future.cancel()          # the connection went away meanwhile
        gate.set()
        second = Request(0, None, 3, 0, 2, b"")
        channel.put(second)
        assert second.future.result(5) == b"answer-2"
        assert first.future.cancelled()
    except concurrent.futures.TimeoutError:
        raise AssertionError(f"the handler thread stopped: {died}") from None
    finally:
        pool.stop()
        threading.excepthook = old_hook
    assert died == []
