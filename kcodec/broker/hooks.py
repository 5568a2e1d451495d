"""Test hooks: see each request before its handler and change what happens to it.

A hook is ``fn(request) -> action``; ``request`` has ``node_id``, ``api_key``,
``api_version``, ``header`` and the decoded ``body``. The action is one of:

* ``None``: carry on (the handler answers as usual);
* an error code (``int`` / ``ErrorCode``): answer with that code in every error field
  (a Produce answered so is not written);
* a response message: sent as the answer;
* ``Delay(seconds)``: carry on after that long (then the handler answers);
  ``Delay(seconds, then=code)`` answers with that error code after the delay instead;
* ``DROP``: close the connection without answering (nothing is done);
* ``LOSE_ANSWER``: do the work (a Produce is written), then close the connection instead of
  answering -- the answer is lost, as when a network fails after the broker acted;
* ``NEVER``: never answer (the connection stays open and stuck, as with a hung broker).

Errors pushed with ``push_errors(api_key, codes)`` are used one per request, before the hooks.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kcodec.broker.network.channel import CLOSE, NO_RESPONSE
from kcodec.protocol import Message, ProduceResponse

__all__ = ["Hooks", "Delay", "DROP", "LOSE_ANSWER", "NEVER", "with_error"]

DROP = "drop"
LOSE_ANSWER = "lose-answer"
NEVER = "never"


@dataclass(frozen=True)
class Delay:
    """A hook's answer: hold the request ``seconds``, then answer it normally (or with the
    error code ``then``)."""
    seconds: float
    then: int | None = None     # an error code to answer with after the delay


def _set_errors(obj: Any, code: int) -> None:
    """Put ``code`` into every ``error_code`` of a response tree."""
    if isinstance(obj, list):
        for x in obj:
            _set_errors(x, code)
        return
    slots = getattr(obj, "__slots__", None) or getattr(type(obj), "FIELD_NAMES", None) or ()
    names = list(slots) if slots else list(getattr(obj, "__dict__", {}))
    for name in names:
        v = getattr(obj, name, None)
        if name == "error_code" and isinstance(v, int):
            setattr(obj, name, int(code))
        elif isinstance(v, list) or hasattr(v, "__slots__") or hasattr(v, "__dict__"):
            if not isinstance(v, (bytes, str, memoryview)) and v is not None:
                _set_errors(v, code)


def with_error(request: Any, code: int, proceed: Callable[[], Any]) -> Any:
    """The answer to ``request`` with error ``code`` everywhere."""
    if request.api_key == 0:    # Produce: answer without writing anything
        P = ProduceResponse
        if request.body.acks == 0:
            return NO_RESPONSE
        return P(responses=[P.TopicProduceResponse(name=t.name, topic_id=t.topic_id, partition_responses=[
            P.PartitionProduceResponse(index=p.index, error_code=int(code), base_offset=-1)
            for p in t.partition_data]) for t in request.body.topic_data])
    answer = proceed()
    if isinstance(answer, concurrent.futures.Future):
        out: concurrent.futures.Future = concurrent.futures.Future()

        def done(f: concurrent.futures.Future) -> None:
            a = f.result()
            if isinstance(a, Message):
                _set_errors(a, code)
            out.set_result(a)
        answer.add_done_callback(done)
        return out
    if isinstance(answer, Message):
        _set_errors(answer, code)
    return answer


class Hooks:
    def __init__(self, timer: Any) -> None:
        self.timer = timer
        self._lock = threading.Lock()
        self._hooks: dict[int | None, list[Callable[[Any], Any]]] = defaultdict(list)
        self._errors: dict[int, deque] = defaultdict(deque)

    @property
    def active(self) -> bool:
        return bool(self._hooks) or any(self._errors.values())

    def add(self, api_key: int | None, fn: Callable[[Any], Any]) -> Callable[[], None]:
        """Add a hook for one API (None: every API); returns a function that removes it."""
        with self._lock:
            self._hooks[api_key].append(fn)

        def remove() -> None:
            with self._lock:
                lst = self._hooks.get(api_key, [])
                if fn in lst:
                    lst.remove(fn)
                if not lst:
                    self._hooks.pop(api_key, None)
        return remove

    def push_errors(self, api_key: int, codes: list[int]) -> None:
        with self._lock:
            self._errors[api_key].extend(int(c) for c in codes)

    def clear(self) -> None:
        with self._lock:
            self._hooks.clear()
            self._errors.clear()

    def _action(self, req: Any) -> Any:
        with self._lock:
            errs = self._errors.get(req.api_key)
            if errs:
                code = errs.popleft()
                return code if code else None
            fns = list(self._hooks.get(req.api_key, ())) + list(self._hooks.get(None, ()))
        for fn in fns:
            action = fn(req)
            if action is not None:
                return action
        return None

    def run(self, node: Any, req: Any, proceed: Callable[[], Any]) -> Any:
        action = self._action(req)
        if action is None:
            return proceed()
        if isinstance(action, Message):
            return action
        if action == DROP:
            return CLOSE
        if action == LOSE_ANSWER:
            answer = proceed()
            if isinstance(answer, concurrent.futures.Future):
                lost: concurrent.futures.Future = concurrent.futures.Future()
                answer.add_done_callback(lambda f: lost.set_result(CLOSE))
                return lost
            return CLOSE
        if action == NEVER:
            return concurrent.futures.Future()
        if isinstance(action, Delay):
            out: concurrent.futures.Future = concurrent.futures.Future()

            def later() -> None:
                try:
                    a = proceed() if action.then is None else with_error(req, action.then, proceed)
                except Exception as exc:   # pragma: no cover - handler bug
                    out.set_exception(exc)
                    return
                if isinstance(a, concurrent.futures.Future):
                    a.add_done_callback(lambda f: out.set_result(f.result()))
                else:
                    out.set_result(a)
            self.timer.call_later(action.seconds, later)
            return out
        if isinstance(action, int):
            return with_error(req, action, proceed)
        raise TypeError(f"a broker hook returned {action!r}")
