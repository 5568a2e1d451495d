"""A bounded cache of the segment files' open descriptors, shared by every log of the
process.

Kafka keeps each segment's log and index files open (two or three descriptors a segment),
so the partitions a node may hold are bounded by ``ulimit -n``. Here a segment opens its
``.log``, ``.index`` and ``.timeindex`` when it reads or writes them, through this cache:
at most ``capacity`` of them stay open, the least recently used are closed when more are
needed, and a descriptor in use (between ``acquire`` and ``release``) is never closed
under its user. Many partitions on disk then cost no descriptors beyond the bound, and a
node keeps accepting connections whatever was created.

The default capacity is a quarter of the process's soft descriptor limit, between 16 and
10,000 (``set_capacity`` changes it).
"""

from __future__ import annotations

import errno
import os
import threading
from collections import OrderedDict
from typing import Any

__all__ = ["FileCache", "SEGMENT_FILES", "default_capacity"]

MIN_CAPACITY = 16
MAX_CAPACITY = 10_000


def default_capacity() -> int:
    """A quarter of the soft RLIMIT_NOFILE, within [MIN_CAPACITY, MAX_CAPACITY]."""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 1024
    if limit == resource.RLIM_INFINITY or limit <= 0:
        return MAX_CAPACITY
    return max(MIN_CAPACITY, min(MAX_CAPACITY, int(limit) // 4))


class _Entry:
    __slots__ = ("fd", "pins", "dead")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pins = 0
        self.dead = False


class FileCache:
    """Open descriptors by ``(owner, path)``, at most ``capacity`` (plus those in use)."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = default_capacity() if capacity is None else max(1, capacity)
        self._lock = threading.Lock()
        self._open: OrderedDict[tuple[Any, str], _Entry] = OrderedDict()
        #: descriptors opened and closed by the cache over its life (for tests and metrics)
        self.opened = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._open)

    def set_capacity(self, capacity: int) -> None:
        with self._lock:
            self.capacity = max(1, capacity)
            self._evict(self.capacity)

    def acquire(self, owner: Any, path: str, flags: int) -> int:
        """The descriptor of ``path`` for ``owner``, opened with ``flags`` if it is not open
        (without O_TRUNC/O_CREAT effects beyond the first open: pass them only when meant);
        pinned until ``release``."""
        key = (owner, path)
        with self._lock:
            e = self._open.get(key)
            if e is not None:
                self._open.move_to_end(key)
                e.pins += 1
                return e.fd
            self._evict(self.capacity - 1)
            try:
                fd = os.open(path, flags, 0o644)
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE):
                    raise
                self._evict(0)          # out of descriptors: give back every unused one
                fd = os.open(path, flags, 0o644)
            self.opened += 1
            e = _Entry(fd)
            e.pins = 1
            self._open[key] = e
            return fd

    def release(self, owner: Any, path: str) -> None:
        with self._lock:
            e = self._open.get((owner, path))
            if e is None:
                return
            e.pins -= 1
            if e.dead and e.pins <= 0:
                del self._open[(owner, path)]
                os.close(e.fd)

    def forget(self, owner: Any, path: str) -> None:
        """Close ``path``'s descriptor for ``owner`` (at once, or when its last user
        releases it): the file is being replaced, truncated by name, or removed."""
        with self._lock:
            e = self._open.get((owner, path))
            if e is None:
                return
            if e.pins > 0:
                e.dead = True
                return
            del self._open[(owner, path)]
            os.close(e.fd)

    def _evict(self, keep: int) -> None:
        """Close least recently used, unpinned descriptors until at most ``keep`` are open
        (the lock is held)."""
        if len(self._open) <= keep:
            return
        for key in list(self._open):
            if len(self._open) <= keep:
                break
            e = self._open[key]
            if e.pins > 0:
                continue
            del self._open[key]
            self.evicted += 1
            os.close(e.fd)


#: the cache every on-disk segment of the process opens its files through
SEGMENT_FILES = FileCache()
