"""``kcodec ctl``: ask a running ``kcodec run`` about itself, or tell it what to do.

    kcodec ctl status                 # processes, restarts, RSS, rates
    kcodec ctl lag                    # every partition's committed vs end, plus the store
    kcodec ctl offsets                # committed, end, lag; live positions where owned
    kcodec ctl backlog                # the store: pending, delayed, processing, failed
    kcodec ctl members | leader       # the consumer group, from the group protocol
    kcodec ctl metadata brokers|topics
    kcodec ctl failed [--limit N]     # a look at the failed queue
    kcodec ctl requeue | clear        # failed -> pending again, or dropped
    kcodec ctl stop                   # as SIGTERM to the runtime

The runtime is found by its control socket: --state-dir (default ./kcodec-run, as
``kcodec run``) or --socket. With no runtime running, ``lag``, ``offsets``, ``backlog``,
``failed``, ``requeue`` and ``clear`` go to the cluster and the store themselves: the
settings the runtime left in ``<state-dir>/runtime.json``, and over them the same sources
as ``kcodec run`` (``--config``, ``KCODEC_RUN_*``, the flags below; a Redis password is
never written there: give ``--redis-url`` or ``KCODEC_RUN_REDIS_URL``). Tables for people,
--json for machines (one JSON document). Exit 1 when the runtime (or, stopped, the store or
the cluster) cannot be reached or answers with an error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from kcodec.cli._client import guarded, table

NAME = "ctl"
HELP = "ask a running `kcodec run` (status, lag, offsets, backlog, members, ...) or requeue/clear"


EXAMPLES = [
    "kcodec ctl status",
    "kcodec ctl lag --json",
]
def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kcodec.runtime.control import QUESTIONS

    parser.add_argument("question", choices=QUESTIONS, metavar="QUESTION",
                        help=", ".join(QUESTIONS))
    parser.add_argument("what", nargs="?", choices=("brokers", "topics"),
                        help="for metadata: brokers (default) or topics")
    parser.add_argument("--state-dir", default=os.environ.get("KCODEC_RUN_STATE_DIR", "kcodec-run"),
                        help="the runtime's --state-dir (default ./kcodec-run)")
    parser.add_argument("--socket", default=os.environ.get("KCODEC_RUN_CONTROL_SOCKET"),
                        help="the control socket (default <state-dir>/control.sock)")
    parser.add_argument("--limit", type=int, default=20, help="failed: how many (default 20)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait (default 30)")
    parser.add_argument("--json", action="store_true", help="JSON instead of a table")
    g = parser.add_argument_group("with no runtime running (lag, offsets and the store's "
                                  "questions)")
    g.add_argument("-c", "--config", metavar="FILE", help="the runtime's TOML config file")
    g.add_argument("-g", "--group", help="the consumer group")
    g.add_argument("-t", "--topic", dest="topics", action="append", metavar="TOPIC",
                   help="its topics (repeat, or comma-separated)")
    g.add_argument("-b", "--bootstrap", metavar="HOST:PORT[,...]", help="bootstrap brokers")
    g.add_argument("--storage", choices=("direct", "file", "redis"), help="the store's kind")
    g.add_argument("--redis-url", help="redis://host:port/db of the redis store")
    g.add_argument("--redis-prefix", help="its key prefix (default kcodec:<group>)")


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.runtime.control import ControlError, NotRunning, ask

    path = args.socket or os.path.join(args.state_dir, "control.sock")
    extra: dict[str, Any] = {}
    if args.question == "metadata":
        extra["what"] = args.what or "brokers"
    elif args.what:
        raise ValueError(f"{args.question} takes no {args.what!r}")
    if args.question == "failed":
        extra["limit"] = args.limit
    try:
        try:
            result = ask(path, args.question, timeout=args.timeout, **extra)
        except NotRunning:
            if args.question not in OFFLINE:
                raise
            result = _offline(args, extra)
    except (ControlError, ConnectionError, RuntimeError) as exc:
        print(f"kcodec ctl: error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=None, separators=(",", ":"), default=str))
        return 0
    _show(args.question, args.what or "brokers", result)
    return 0


# what ``kcodec ctl`` answers from the cluster and the store when no runtime runs
OFFLINE = ("lag", "offsets", "backlog", "failed", "requeue", "clear")


def _offline(args: argparse.Namespace, extra: dict[str, Any]) -> Any:
    from kcodec.runtime import views
    from kcodec.runtime.config import Settings
    from kcodec.runtime.control import read_description
    from kcodec.runtime.storage import open_store

    base = read_description(args.state_dir)
    base["state_dir"] = args.state_dir
    flags: dict[str, Any] = {"group": args.group, "bootstrap": args.bootstrap,
                             "storage": args.storage, "redis_url": args.redis_url,
                             "redis_prefix": args.redis_prefix}
    if args.topics:
        flags["topics"] = [t for item in args.topics for t in item.split(",") if t]
    client = {k: v for k, v in (base.get("client") or {}).items() if v != "***"}
    base["client"] = client
    s = Settings.build(file=args.config, overrides=flags, defaults=base)
    if s.storage == "redis" and "***" in s.store_settings("redis").redis_url:
        raise ValueError("the runtime's Redis URL has a password, which is not kept in "
                         f"{args.state_dir}/runtime.json: give --redis-url or "
                         "KCODEC_RUN_REDIS_URL")
    q = args.question
    if q in ("lag", "offsets"):
        if not s.group or not s.topics:
            raise ValueError(f"{q} with no runtime running needs the group and its topics: "
                             "give -g and -t (or the runtime's --state-dir)")
        if q == "offsets":
            return views.offsets(s)
    lock = None
    if s.storage != "redis":
        from kcodec.runtime.statedir import lock_dir

        if not os.path.isdir(os.path.join(s.state_dir, "store")):
            raise ValueError(f"no store in {s.state_dir!r}: give the runtime's --state-dir "
                             "(or --storage redis and its --redis-url)")
        lock = lock_dir(s.state_dir)      # no runtime may start on it meanwhile
    try:
        store = open_store(s, "ctl", quick=True)
        try:
            return views.lag(s, store) if q == "lag" else views.store_answer(s, store, q, extra)
        finally:
            store.close()
    finally:
        if lock is not None:
            os.close(lock)


def _mb(n: Any) -> str:
    return f"{(n or 0) / 2**20:.0f} MB"


def _show(q: str, what: str, r: Any) -> None:
    if q == "status":
        up = time.time() - r["since"]
        print(f"kcodec run pid {r['pid']}: group {r['group']}, topics {','.join(r['topics'])}, "
              f"storage {r['storage']}, {r['state']} for {up:.0f} s, master RSS {_mb(r['rss'])}")
        table(["role", "slot", "pid", "state", "restarts", "rss", "records", "rate/s", "done",
               "retried", "dead", "last exit"],
              [[p["role"], p["slot"], p["pid"] or "-",
                p["state"] + (f" (in {p['restart_in']} s)" if "restart_in" in p else ""),
                p["restarts"], _mb(p["rss"]), p["records"], f"{p['rate']:.0f}", p["done"],
                p["retried"], p["dead"], p["last_exit"] or ""] for p in r["processes"]])
    elif q == "lag":
        table(["topic", "partition", "committed", "position", "end", "lag", "member"],
              [[p["topic"], p["partition"], p["committed"], p["position"], p["end"], p["lag"],
                p["member"] or ""] for p in r["partitions"]])
        b = r["backlog"]
        store = "" if b is None else (f" + {r['store']} in the store (pending {b['pending']}, "
                                      f"delayed {b['delayed']}, processing {b['processing']})")
        print(f"total lag: {r['total']} = {r['kafka']} in Kafka{store}")
    elif q == "offsets":
        table(["topic", "partition", "position", "committed", "end", "remaining"],
              [[p["topic"], p["partition"], p["position"], p["committed"], p["end"],
                p["remaining"]] for p in r])
    elif q == "backlog":
        table(["storage", "pending", "delayed", "processing", "failed"],
              [[r["storage"], r["pending"], r["delayed"], r["processing"], r["failed"]]])
    elif q == "members":
        print(f"group {r['group']}: {r['state']}, protocol {r['protocol']} ({r['type']})")
        table(["member", "client", "host", "leader", "this runtime", "assignment"],
              [[m["member_id"], m["client_id"], m["host"], "yes" if m["leader"] else "",
                "yes" if m["ours"] else "",
                " ".join(f"{t}{sorted(ps)}" for t, ps in sorted(m["assignment"].items()))]
               for m in r["members"]])
    elif q == "leader":
        if r["leader"] is None:
            print(f"no leader: {r['source']}")
        else:
            print(f"{r['leader']}{' (a puller of this runtime)' if r['ours'] else ''}")
    elif q == "metadata" and what == "brokers":
        table(["node", "host", "port", "rack"],
              [[b["node_id"], b["host"], b["port"], b["rack"]] for b in r])
    elif q == "metadata":
        table(["topic", "partition", "leader", "replicas", "isr"],
              [[t["name"], p["partition"], p["leader"], ",".join(map(str, p["replicas"])),
                ",".join(map(str, p["isr"]))] for t in r for p in t["partitions"]])
    elif q == "failed":
        table(["topic", "partition", "offset", "attempts", "error", "value"],
              [[m["topic"], m["partition"], m["offset"], m["attempts"], (m["error"] or "")[:60],
                str(m["value"])[:40]] for m in r])
    elif q == "requeue":
        print(f"requeued {r['requeued']} failed messages")
    elif q == "clear":
        print(f"dropped {r['cleared']} failed messages")
    elif q == "stop":
        print("stopping")
