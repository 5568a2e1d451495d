"""``kcodec topics list|describe|create|delete``."""

from __future__ import annotations

import argparse
from typing import Any

from kcodec.cli._client import (
    UsageError,
    add_connection,
    client_config,
    did_you_mean,
    guarded,
    json_line,
    require_topics,
    table,
    which_one,
)

NAME = "topics"
HELP = "list, describe, create or delete topics"
EXAMPLES = [
    "kcodec topics list",
    "kcodec topics describe events",
    "kcodec topics create events -p 6 --config retention.ms=86400000",
    "kcodec topics delete events",
]
ACTIONS = {"list": "topics and their partition counts",
           "describe": "each partition of topics with its leader, replicas and ISR",
           "create": "create topics (-p partitions, -r replication, --config KEY=VALUE)",
           "delete": "delete topics"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    p = sub.add_parser("list", help=ACTIONS["list"])
    p.add_argument("names", nargs="*", metavar="TOPIC", help="only these topics")
    add_connection(p)
    p = sub.add_parser("describe", help=ACTIONS["describe"], description=ACTIONS["describe"])
    p.add_argument("names", nargs="*", metavar="TOPIC", help="these topics (default: all)")
    add_connection(p)
    p = sub.add_parser("create", help=ACTIONS["create"])
    p.add_argument("names", nargs="+", metavar="TOPIC")
    p.add_argument("-p", "--partitions", type=int, default=-1,
                   help="partitions of each new topic (default: the broker's)")
    p.add_argument("-r", "--replication-factor", type=int, default=-1,
                   help="replication factor (default: the broker's)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a topic config of each new topic, as Kafka names it, e.g. "
                        "retention.ms=86400000 or cleanup.policy=compact (repeatable)")
    add_connection(p)
    p = sub.add_parser("delete", help=ACTIONS["delete"])
    p.add_argument("names", nargs="+", metavar="TOPIC")
    add_connection(p)


def _configs(specs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for spec in specs:
        k, sep, v = spec.partition("=")
        if not sep or not k.strip():
            raise UsageError(f"--config {spec!r} is not KEY=VALUE")
        if k in out and out[k] != v:
            raise UsageError(f"--config {k} given twice ({out[k]!r} and {v!r})")
        out[k] = v
    return out


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.client import Admin, NewTopic

    if args.action is None:
        return which_one(args.command, ACTIONS)
    configs = _configs(args.config) if args.action == "create" else {}
    if args.action == "create" and (args.partitions == 0 or args.partitions < -1):
        raise UsageError(f"--partitions must be positive, got {args.partitions}")
    known: list[str] = []
    with Admin(**client_config(args)) as admin:
        if args.action == "describe":
            return _describe(admin, args)
        if args.action == "list":
            if args.names:
                md = require_topics(admin, list(dict.fromkeys(args.names)))
            else:
                md = admin.describe_cluster()
            topics = [t for t in md.topics if not args.names or t.name in args.names]
            if args.json:
                for t in topics:
                    json_line({"topic": t.name, "partitions": len(t.partitions)})
            else:
                table(["topic", "partitions"], [(t.name, len(t.partitions)) for t in topics])
            return 0
        if args.action == "create":
            result = admin.create_topics([NewTopic(n, args.partitions, args.replication_factor,
                                                   configs) for n in args.names])
        else:
            result = admin.delete_topics(args.names)
            if any(e is not None for e in result.values()):
                known = [t.name for t in admin.describe_cluster().topics]
    failed = 0
    done = "created" if args.action == "create" else "deleted"
    for name in args.names:
        err = result.get(name)
        failed += err is not None
        if args.json:
            json_line({"topic": name, "ok": err is None, "error": None if err is None else err.name,
                       "message": None if err is None else err.message})
        elif err is None:
            print(f"{name}: {done}")
        else:
            said = f": {err.message}" if err.message else ""
            near = ""
            if err.name == "UNKNOWN_TOPIC_OR_PARTITION":
                said = ": no such topic ('kcodec topics list' shows the topics)"
                near = did_you_mean(name, known)
            print(f"{name}: {err.name}{said}{near}")
    return 1 if failed else 0


def _describe(admin: Any, args: argparse.Namespace) -> int:
    names = list(dict.fromkeys(args.names))
    md = require_topics(admin, names) if names else admin.describe_cluster()
    topics = [t for t in md.topics if not names or t.name in names]
    if args.json:
        for t in topics:
            for p in t.partitions:
                json_line({"topic": t.name, "partition": p.partition, "leader": p.leader,
                           "replicas": p.replicas, "isr": p.isr})
        return 0
    table(["topic", "partition", "leader", "replicas", "isr"],
          [(t.name, p.partition, p.leader, ",".join(map(str, p.replicas)),
            ",".join(map(str, p.isr))) for t in topics for p in t.partitions])
    return 0
