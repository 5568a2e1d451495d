"""The table of API handlers and the versions the broker advertises.

Each handler module registers its functions with ``@api(XRequest, lo, hi)``: the API key
comes from the request class, as on the client (``cluster.request(node, XRequest(...))``),
never beside it. A handler takes ``(node, req)``, where ``req`` is the
:class:`~kcodec.broker.network.channel.Request` read from the connection with its
``header`` and decoded ``body`` filled in (``Incoming[XRequest]``: the body is an
``XRequest``), and returns the response message (``XResponse``), a
``concurrent.futures.Future`` of one (delayed answers), or ``NO_RESPONSE``/``CLOSE``
(:data:`Answer`). The decorator is typed so that mypy checks a handler's body type against
the class it is registered for, and each field a handler reads or writes.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any, TypeVar, Union

from kcodec.broker.network.channel import Request as Incoming
from kcodec.protocol import REQUESTS, RESPONSES, Request, Response

__all__ = ["api", "Answer", "Handler", "Incoming", "HANDLERS", "VERSIONS"]

Q = TypeVar("Q", bound=Request[Any])
R = TypeVar("R", bound=Response)

#: what a handler returns: its response, a future of it, or CLOSE / NO_RESPONSE
Answer = Union[R, "concurrent.futures.Future[R]", str]
#: a registered handler, as dispatch calls it
Handler = Callable[[Any, Incoming[Any]], Any]

HANDLERS: dict[int, Handler] = {}
VERSIONS: dict[int, tuple[int, int]] = {}


def api(cls: type[Q], lo: int, hi: int
        ) -> Callable[[Callable[[Any, Incoming[Q]], Any]], Callable[[Any, Incoming[Q]], Any]]:
    """Register a handler for the API of request class ``cls``, versions ``lo``..``hi``
    (within what kcodec's protocol classes decode, and whose response they encode)."""
    key = getattr(cls, "API_KEY", None)
    if key is None or REQUESTS.get(key) is not cls:
        raise TypeError(f"{cls.__name__} is not the request class of API key {key}")
    lo, hi = max(lo, cls.MIN_VERSION), min(hi, cls.MAX_VERSION, RESPONSES[key].MAX_VERSION)

    def deco(fn: Callable[[Any, Incoming[Q]], Any]) -> Callable[[Any, Incoming[Q]], Any]:
        old = HANDLERS.get(key)
        if old is not None and (old.__module__, old.__qualname__) != (fn.__module__,
                                                                      fn.__qualname__):
            raise TypeError(f"API {cls.__name__} has two handlers: "
                            f"{old.__qualname__} and {fn.__qualname__}")
        HANDLERS[key] = fn
        VERSIONS[key] = (lo, hi)
        return fn
    return deco
