"""The life of one runtime process (a puller or a sinker), started by the master.

It answers the master's questions on its pipe from a thread of its own, stops cleanly on the
first SIGINT/SIGTERM (or when the master goes away, or asks it to make room after passing the
RSS limit) and at once on the second. Exit codes the master reads: 0 stopped as asked,
3 the handler overran its deadline (restart), 4 recycled for memory (restart at once).
"""

from __future__ import annotations

import logging
import os
import resource
import signal
import sys
import threading
import time
from collections.abc import Iterable
from typing import Any

from kcodec._gc import YOUNG_THRESHOLD, settle

__all__ = ["main", "rss_bytes", "set_title", "settle_gc", "EXIT_HUNG", "EXIT_RECYCLED"]

EXIT_HUNG = 3
EXIT_RECYCLED = 4
log = logging.getLogger(__name__)


def rss_bytes(pid: int | None = None) -> int:
    """Resident set size of ``pid`` (default this process) from /proc; 0 where unknown."""
    try:
        with open(f"/proc/{pid or 'self'}/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


def set_title(title: str, short: str) -> None:
    """Name this process for ps/top: the whole ``title`` as its command line (what ``ps -o
    args`` and ``top -c`` show) and ``short`` (15 bytes: the kernel's limit) as its name
    (``ps -o comm``, ``top``). setproctitle does the first where it is installed; on Linux
    without it the title is written over the process's own argument area
    (``_write_cmdline``); elsewhere only the name is set, where the system has one."""
    try:
        import setproctitle  # type: ignore[import-not-found]

        setproctitle.setproctitle(title)
        return
    except ImportError:
        pass
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(15, ctypes.c_char_p(short.encode()[:15]), 0, 0, 0)   # PR_SET_NAME
        except (OSError, AttributeError):
            pass
        _write_cmdline(title)


def _write_cmdline(title: str) -> bool:
    """On Linux: ``title`` over the memory that holds this process's arguments, which the
    kernel shows as /proc/PID/cmdline (CPython keeps copies of its arguments: sys.argv is
    untouched). The area's bounds are the ``arg_start``/``arg_end`` fields of
    /proc/self/stat; it is written only if it holds exactly what /proc/self/cmdline shows,
    and the title is cut to its length (a spawned child's command line is over 100 bytes).
    False when it was not written."""
    import ctypes

    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        with open("/proc/self/cmdline", "rb") as f:
            shown = f.read()
        # the fields after the command name (in parentheses, which may hold anything)
        fields = stat[stat.rindex(b")") + 2:].split()
        start, end = int(fields[45]), int(fields[46])    # fields 48 and 49 of proc(5)
    except (OSError, ValueError, IndexError):
        return False
    size = end - start
    if size <= 1 or size != len(shown) or ctypes.string_at(start, size) != shown:
        return False
    raw = title.encode("utf-8", "replace")[:size - 1]
    ctypes.memmove(start, raw + b"\0" * (size - len(raw)), size)
    return True


# the cyclic GC's young-generation threshold in a runtime process (CPython's default: 700)
GC_YOUNG_THRESHOLD = YOUNG_THRESHOLD


def settle_gc() -> None:
    """Set the cyclic GC up for a busy runtime process, once it is set up (imports, the
    handler, the store): ``kcodec._gc.settle``. A puller makes a tracked object per record
    (its headers list); under the defaults it ran 17 full collections a million records,
    each walking the ~60,000 objects of its imports: 0.5-0.7 s of a 3-4 s run."""
    settle()


class RedactingFormatter(logging.Formatter):
    """Formats as usual, then blanks out ``secrets`` (and ``password=...`` style text)
    wherever they appear: messages, arguments and tracebacks alike."""

    def __init__(self, fmt: str, secrets: Iterable[str] = ()) -> None:
        super().__init__(fmt)
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def format(self, record: logging.LogRecord) -> str:
        from kcodec.observe.log import redact

        text = super().format(record)
        for s in self.secrets:
            text = text.replace(s, "***")
        return redact(text)


def setup_logging(level: str, who: str, secrets: Iterable[str] = ()) -> None:
    h = logging.StreamHandler(sys.stderr)
    h.setFormatter(RedactingFormatter(f"%(asctime)s kcodec run [{who}] %(levelname)s %(message)s",
                                      secrets))
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=[h],
                        force=True)


def main(role: str, slot: int, settings: dict[str, Any], handler_ref: str, conn: Any) -> None:
    from kcodec.runtime.config import Settings
    from kcodec.runtime.handler import load_ref
    from kcodec.runtime.storage import open_store

    s = Settings(**settings)
    who = f"{role} {slot}"
    set_title(f"kcodec run: {who} (group {s.group})", f"kcodec-{role}-{slot}")
    setup_logging(s.log_level, who, s.secrets())
    stop = threading.Event()
    signals = [0]

    def on_signal(signum: int, _frame: Any) -> None:
        signals[0] += 1
        if signals[0] > 1:
            os._exit(128 + signum)
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    code = 1
    worker: Any = None
    from kcodec.runtime.statedir import hold_children_lock

    hold_children_lock(s.state_dir)     # held until this process ends, however it ends
    try:
        handler = load_ref(handler_ref) if (role == "sinker" or s.storage == "direct") else None
        store = open_store(s, f"{role[0]}{slot}")
        if role == "puller":
            from kcodec.runtime.puller import Puller

            worker = Puller(s, slot, store, stop, handler)
        else:
            from kcodec.runtime.sinker import Sinker

            worker = Sinker(s, slot, store, stop, handler)
        threading.Thread(target=_control, args=(conn, role, slot, worker, stop), daemon=True,
                         name="kcodec-control").start()
        settle_gc()
        code = worker.run()
        if code == 0 and worker.recycle:
            code = EXIT_RECYCLED
        if role == "puller" and s.storage != "direct":
            store.close()
    except Exception:
        log.exception("%s stopped by an error", who)
        code = 1
    finally:
        logging.shutdown()
    # a hung handler's thread cannot be joined: leave without waiting for it
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _control(conn: Any, role: str, slot: int, worker: Any, stop: threading.Event) -> None:
    """Answer the master: {"id", "op"} -> {"id", "result"}; EOF: the master is gone."""
    while True:
        try:
            if not conn.poll(0.5):
                continue
            req = conn.recv()
        except (EOFError, OSError):
            if not stop.is_set():
                log.warning("the master is gone: stopping")
                stop.set()
            return
        try:
            result = answer(req.get("op", ""), role, slot, worker, stop)
        except Exception as exc:   # a question must not kill the worker
            result = {"error": f"{type(exc).__name__}: {exc}"}
        try:
            conn.send({"id": req.get("id"), "result": result})
        except (OSError, ValueError):
            return


def answer(op: str, role: str, slot: int, worker: Any, stop: threading.Event) -> Any:
    if op == "status":
        return {"role": role, "slot": slot, "pid": os.getpid(), "rss": rss_bytes(),
                "state": "stopping" if stop.is_set() else
                         ("recycling" if worker.recycle else "running"),
                "paused": bool(getattr(worker, "paused", False)),
                "in_hand": getattr(worker, "in_hand", len(getattr(worker, "buf", ()))),
                **worker.stats.to_dict()}
    if op == "metrics":
        return _metrics(role, slot, worker)
    if op == "stop":
        stop.set()
        return {"ok": True}
    if op == "recycle":
        worker.recycle = True
        return {"ok": True}
    if op == "offsets" and role == "puller":
        return worker.offsets()
    if op == "group" and role == "puller":
        return worker.group()
    if op in ("members", "metadata") and role == "puller":
        return _admin(op, worker)
    if op == "ready" and role == "puller":
        return bool(worker.ready())
    if op == "ping":
        return {"time": time.time()}
    return None


def _metrics(role: str, slot: int, worker: Any) -> list[tuple[str, str, dict, float, str]]:
    """This process's readings for the master's Prometheus endpoint: the runtime's counters
    and, in a puller, its consumer's metrics (kcodec.client.metrics), tagged with the role
    and slot."""
    who = {"role": role, "slot": slot}
    st = worker.stats
    g = "kcodec.runtime:Worker"
    out = [(g, "records", who, st.records, "counter"), (g, "done", who, st.done, "counter"),
           (g, "retried", who, st.retried, "counter"), (g, "dead", who, st.dead, "counter"),
           (g, "batches", who, st.batches, "counter"), (g, "rss-bytes", who, rss_bytes(), "gauge"),
           (g, "in-hand", who, getattr(worker, "in_hand", len(getattr(worker, "buf", ()))),
            "gauge")]
    consumer = getattr(worker, "consumer", None)
    if consumer is not None:
        from kcodec.client.metrics import registry_of

        try:
            samples = registry_of(consumer).snapshot()
        except (TypeError, ValueError):     # not started, or metrics off
            samples = []
        for s in samples:
            if s.kind == "rate":            # Prometheus takes rates of the counters itself
                continue
            out.append((s.group, s.name, {**dict(s.tags), **who}, s.value,
                        "counter" if s.kind == "counter" else "gauge"))
    return out


def _admin(op: str, worker: Any) -> Any:
    from kcodec.client import Admin

    s = worker.s
    with Admin(**s.admin_config()) as a:
        if op == "members":
            d = a.describe_groups([s.group])[0]
            return {"group": d.group_id, "state": d.state, "protocol": d.protocol,
                    "type": d.type,
                    "members": [{"member_id": m.member_id, "client_id": m.client_id,
                                 "host": m.host, "assignment": m.assignment,
                                 "group_instance_id": m.group_instance_id}
                                for m in d.members]}
        md = a.describe_cluster(list(s.topics))
        return {"cluster_id": md.cluster_id, "controller": md.controller_id,
                "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port,
                             "rack": b.rack} for b in md.brokers],
                "topics": [{"name": t.name, "partitions": [
                    {"partition": p.partition, "leader": p.leader, "replicas": p.replicas,
                     "isr": p.isr} for p in t.partitions]} for t in md.topics]}
