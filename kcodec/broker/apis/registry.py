"""The table of API handlers and the versions the broker advertises.

Each handler module registers its functions with ``@api(key, min, max)``; a handler takes
``(node, request)`` (the request's ``header`` and decoded ``body`` filled in) and returns the
response message, a ``concurrent.futures.Future`` of one (delayed answers), or
``NO_RESPONSE``/``CLOSE``.
"""

from __future__ import annotations

from typing import Any, Callable

from kcodec.protocol import REQUESTS, RESPONSES

__all__ = ["api", "HANDLERS", "VERSIONS"]

HANDLERS: dict[int, Callable[[Any, Any], Any]] = {}
VERSIONS: dict[int, tuple[int, int]] = {}


def api(key: int, lo: int, hi: int) -> Callable[[Callable], Callable]:
    """Register a handler for API ``key``, versions ``lo``..``hi`` (within what kcodec's
    protocol classes decode, and whose response they encode)."""
    cls = REQUESTS[key]
    lo, hi = max(lo, cls.MIN_VERSION), min(hi, cls.MAX_VERSION, RESPONSES[key].MAX_VERSION)

    def deco(fn: Callable) -> Callable:
        HANDLERS[key] = fn
        VERSIONS[key] = (lo, hi)
        return fn
    return deco
