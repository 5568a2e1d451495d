"""The pullers' group members, as the master sees them: each puller notes its member id
and group protocol in ``<state_dir>/members/puller-<slot>.json`` once it has joined, so that
when it dies (a kill -9, a crash) the master removes that member from the group at once, on
its behalf (``Admin.remove_members``: LeaveGroup for the classic protocol, a heartbeat at
epoch -1 for the consumer protocol), and its partitions move in about a second instead of
after the session timeout.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import Any

__all__ = ["write_member", "read_member", "remove_dead_member", "joined"]

log = logging.getLogger(__name__)


def _path(state_dir: str, slot: int) -> str:
    return os.path.join(state_dir, "members", f"puller-{slot}.json")


def write_member(state_dir: str, slot: int, member_id: str, protocol: str,
                 partitions: int = 0) -> None:
    """From the puller: this process is ``member_id`` of a ``protocol`` group, holding
    ``partitions`` partitions."""
    path = _path(state_dir, slot)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump({"member_id": member_id, "protocol": protocol, "pid": os.getpid(),
                   "partitions": partitions}, f)
    os.replace(tmp, path)


def read_member(state_dir: str, slot: int, pid: int) -> dict[str, Any] | None:
    """What the puller of ``slot`` running as ``pid`` noted (None: nothing, or another's)."""
    try:
        with open(_path(state_dir, slot)) as f:
            got = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(got, dict) or got.get("pid") != pid or not got.get("member_id"):
        return None
    return got


def joined(state_dir: str, pullers: int) -> int:
    """How many pullers of this runtime (live processes) have noted a member holding
    partitions."""
    n = 0
    for slot in range(pullers):
        try:
            with open(_path(state_dir, slot)) as f:
                got = json.load(f)
            os.kill(int(got["pid"]), 0)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if got.get("member_id") and got.get("partitions"):
            n += 1
    return n


def remove_dead_member(settings: Any, slot: int, pid: int, why: str) -> threading.Thread | None:
    """The puller of ``slot`` (``pid``) died: remove its member from the group, on a thread
    of its own (the master's loop goes on). None when it never joined."""
    got = read_member(settings.state_dir, slot, pid)
    if got is None:
        return None
    member, protocol = str(got["member_id"]), str(got.get("protocol") or "classic")

    def go() -> None:
        from kcodec.client import Admin
        from kcodec.errors import KcodecError

        t0 = time.monotonic()
        try:
            with Admin(**settings.admin_config()) as a:
                err = a.remove_members(settings.group, {member: protocol},
                                       reason=f"kcodec run: puller {slot} {why}")[member]
        except (KcodecError, OSError) as exc:
            log.warning("puller %d %s; removing its member %s from group %r failed (%s): its "
                        "partitions move when its session times out", slot, why, member,
                        settings.group, exc)
            return
        if err is None or "UNKNOWN_MEMBER_ID" in str(err):
            log.info("puller %d %s: its member %s left group %r on its behalf (%.2f s); its "
                     "partitions move now", slot, why, member, settings.group,
                     time.monotonic() - t0)
        else:
            log.warning("puller %d %s; removing its member %s from group %r: %s", slot, why,
                        member, settings.group, err)
    t = threading.Thread(target=go, name="kcodec-remove-member", daemon=True)
    t.start()
    return t
