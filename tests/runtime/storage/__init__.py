"""Shared by the store tests."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def redis_stores(url: str, lease_ms: int) -> Iterator[Callable[..., Any]]:
    """A function making Redis stores that share one queue under a new prefix (each one
    process's handle, ``lease_ms`` unless told), every one closed afterwards."""
    from kcodec.runtime.storage.redis import RedisStore

    prefix = f"test:{uuid.uuid4().hex[:8]}"
    made = []

    def make(owner: str, lease_ms: int = lease_ms) -> Any:
        s = RedisStore(url, prefix, owner, lease_ms=lease_ms, give_up_s=10)
        made.append(s)
        return s
    try:
        yield make
    finally:
        for s in made:
            try:
                s.close()
            except Exception:
                pass
