"""A runtime's state directory (``--state-dir``) and who may use it:

* ``lock_dir``: the master holds ``runtime.lock`` for its life (one runtime per directory;
  ``kcodec ctl`` takes it too before it changes a stopped runtime's file store);
* ``hold_children_lock``: every process of a runtime holds ``children.lock`` shared for its
  life, and ``wait_for_children`` lets a new master wait until none of an earlier, dead
  master's processes lives (two writers of one name must never append at once).

Whatever store a runtime uses, these hold (the file store keeps its files below
``<state_dir>/store``; direct mode its failed queue there).
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from typing import Any

__all__ = ["lock_dir", "hold_children_lock", "wait_for_children"]


def hold_children_lock(path: str) -> int:
    """A runtime process holds ``path``/children.lock shared for its life, so a new master
    can wait for every process of a master that died (see ``wait_for_children``)."""
    fd = os.open(os.path.join(path, "children.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def wait_for_children(path: str, timeout: float, log: Any) -> None:
    """Wait until no process of an earlier runtime in ``path`` lives (they stop by themselves
    once their master is gone): two writers of one name must never append at once."""
    fd = os.open(os.path.join(path, "children.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if time.monotonic() > deadline:
                raise RuntimeError(f"processes of an earlier kcodec run in {path!r} are still "
                                   f"running after {timeout:g} s; stop them (they hold "
                                   f"{path}/children.lock: fuser -v that file)")
            if not told:
                log.warning("waiting for the processes of an earlier run in %s to stop", path)
                told = True
            time.sleep(0.1)
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def lock_dir(path: str) -> int:
    """Hold ``path``/runtime.lock for this process's life; an error naming the holder when
    another runtime holds it."""
    os.makedirs(path, exist_ok=True)
    fd = os.open(os.path.join(path, "runtime.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EAGAIN, errno.EACCES):
            raise
        try:
            holder = os.read(fd, 64).decode(errors="replace").strip()
        finally:
            os.close(fd)
        raise RuntimeError(f"another kcodec run (pid {holder or '?'}) uses the state directory "
                           f"{path!r}; stop it, or give this one its own --state-dir") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd
