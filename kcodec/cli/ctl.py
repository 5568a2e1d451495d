"""``kcodec ctl``: ask a running ``kcodec run`` about itself, or tell it what to do.

    kcodec ctl status                 # processes, restarts, RSS, rates
    kcodec ctl lag                    # per partition, from the pullers' positions
    kcodec ctl offsets                # position, committed, end offset, remaining
    kcodec ctl backlog                # the store: pending, delayed, processing, failed
    kcodec ctl members | leader       # the consumer group, from the group protocol
    kcodec ctl metadata brokers|topics
    kcodec ctl failed [--limit N]     # a look at the failed queue
    kcodec ctl requeue | clear        # failed -> pending again, or dropped
    kcodec ctl stop                   # as SIGTERM to the runtime

The runtime is found by its control socket: --state-dir (default ./kcodec-run, as
``kcodec run``) or --socket. Tables for people, --json for machines (one JSON document).
Exit 1 when the runtime cannot be reached or answers with an error.
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


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.runtime.control import ControlError, ask

    path = args.socket or os.path.join(args.state_dir, "control.sock")
    extra: dict[str, Any] = {}
    if args.question == "metadata":
        extra["what"] = args.what or "brokers"
    elif args.what:
        raise ValueError(f"{args.question} takes no {args.what!r}")
    if args.question == "failed":
        extra["limit"] = args.limit
    try:
        result = ask(path, args.question, timeout=args.timeout, **extra)
    except ControlError as exc:
        print(f"kcodec ctl: error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=None, separators=(",", ":"), default=str))
        return 0
    _show(args.question, args.what or "brokers", result)
    return 0


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
        table(["topic", "partition", "position", "end", "lag", "member"],
              [[p["topic"], p["partition"], p["position"], p["end"], p["lag"], p["member"]]
               for p in r["partitions"]])
        print(f"total lag: {r['total']}")
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
