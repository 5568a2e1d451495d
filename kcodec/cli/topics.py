"""``kcodec topics list|create|delete``."""

from __future__ import annotations

import argparse

from kcodec.cli._client import UsageError, add_connection, client_config, guarded, json_line, table

NAME = "topics"
HELP = "list, create or delete topics"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    p = sub.add_parser("list", help="topics and their partition counts")
    p.add_argument("names", nargs="*", metavar="TOPIC", help="only these topics")
    add_connection(p)
    p = sub.add_parser("create", help="create topics")
    p.add_argument("names", nargs="+", metavar="TOPIC")
    p.add_argument("-p", "--partitions", type=int, default=-1,
                   help="partitions of each new topic (default: the broker's)")
    p.add_argument("-r", "--replication-factor", type=int, default=-1,
                   help="replication factor (default: the broker's)")
    add_connection(p)
    p = sub.add_parser("delete", help="delete topics")
    p.add_argument("names", nargs="+", metavar="TOPIC")
    add_connection(p)


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.client import Admin

    if args.action == "create" and (args.partitions == 0 or args.partitions < -1):
        raise UsageError(f"--partitions must be positive, got {args.partitions}")
    with Admin(**client_config(args)) as admin:
        if args.action == "list":
            md = admin.describe_cluster()
            topics = [t for t in md.topics if not args.names or t.name in args.names]
            if args.json:
                for t in topics:
                    json_line({"topic": t.name, "partitions": len(t.partitions)})
            else:
                table(["topic", "partitions"], [(t.name, len(t.partitions)) for t in topics])
            return 0
        if args.action == "create":
            result = admin.create_topics(args.names, args.partitions, args.replication_factor)
        else:
            result = admin.delete_topics(args.names)
    failed = 0
    done = "created" if args.action == "create" else "deleted"
    for name in args.names:
        err = result.get(name)
        failed += err is not None
        if args.json:
            json_line({"topic": name, "ok": err is None, "error": None if err is None else err.name})
        else:
            print(f"{name}: {done}" if err is None else f"{name}: {err.name}")
    return 1 if failed else 0
