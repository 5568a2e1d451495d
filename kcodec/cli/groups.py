"""``kcodec groups list|delete|reset-offsets``: the groups the brokers know (ListGroups,
from every broker), deleting groups (DeleteGroups), and resetting a group's committed
offsets as Kafka's ``kafka-consumer-groups --reset-offsets`` does."""

from __future__ import annotations

import argparse

from kcodec.cli._client import (
    Once,
    UsageError,
    add_connection,
    client_config,
    did_you_mean,
    guarded,
    json_line,
    table,
    which_one,
)

NAME = "groups"
HELP = "list, delete groups, or reset a consumer group's offsets"
EXAMPLES = [
    "kcodec groups list",
    "kcodec groups delete reports",
    "kcodec groups reset-offsets -g reports -t events --to-earliest --execute",
    "kcodec groups reset-offsets -g reports -t events:0,1 --shift-by -100",
    "kcodec groups reset-offsets -g reports --all-topics --to-datetime 2026-12-01T09:00:00",
]
ACTIONS = {"list": "each group with its type, state and protocol type (ListGroups)",
           "delete": "delete groups and their committed offsets (DeleteGroups)",
           "reset-offsets": "set a group's committed offsets (kafka-consumer-groups "
                            "--reset-offsets): shows the plan, commits it with --execute"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    p = sub.add_parser("list", help=ACTIONS["list"], description=ACTIONS["list"] + "; a value "
                       "the broker does not give (old brokers: type and state) shows as '-', "
                       "null in JSON")
    add_connection(p)
    p = sub.add_parser("delete", help=ACTIONS["delete"], description=ACTIONS["delete"] + ": a "
                       "group with members is refused (stop its consumers first)")
    p.add_argument("groups", nargs="+", metavar="GROUP")
    add_connection(p)
    p = sub.add_parser("reset-offsets", help=ACTIONS["reset-offsets"],
                       description=ACTIONS["reset-offsets"] + ". The group must have no "
                       "members. --to-offset and --shift-by are kept within each partition's "
                       "earliest and latest offsets, as Kafka does.")
    p.add_argument("-g", "--group", action=Once, required=True, help="the consumer group")
    w = p.add_argument_group("partitions (one of)")
    w.add_argument("-t", "--topic", action="append", default=[], metavar="TOPIC[:P,P...]",
                   help="a topic, all its partitions or those listed (repeatable)")
    w.add_argument("--all-topics", action="store_true",
                   help="every partition the group has committed offsets for")
    to = p.add_argument_group("target (one of)").add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="each partition's first offset")
    to.add_argument("--to-latest", action="store_true", help="each partition's end offset")
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N")
    to.add_argument("--to-datetime", metavar="WHEN",
                    help="the first offset at or after WHEN: YYYY-MM-DDTHH:MM:SS[.sss][+HH:MM "
                         "or Z] (local time without a zone, as Kafka), or milliseconds since "
                         "the epoch")
    to.add_argument("--shift-by", type=int, metavar="N",
                    help="the committed offset plus N (negative: back)")
    run_ = p.add_mutually_exclusive_group()
    run_.add_argument("--dry-run", action="store_true", help="show the plan only (the default)")
    run_.add_argument("--execute", action="store_true", help="commit the new offsets")
    add_connection(p)


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.client import Admin

    if args.action is None:
        return which_one(args.command, ACTIONS)
    if args.action == "delete":
        return _delete(args)
    if args.action == "reset-offsets":
        return _reset(args)
    with Admin(**client_config(args)) as admin:
        groups = admin.list_groups()
    for g in groups:
        if args.json:
            json_line({"group": g.group_id, "type": g.type or None, "state": g.state or None,
                       "protocol_type": g.protocol_type or None})
    if not args.json:
        table(["group", "type", "state", "protocol type"],
              [(g.group_id, g.type or "-", g.state or "-", g.protocol_type or "-") for g in groups])
    return 0


_WHY = {"NON_EMPTY_GROUP": "it has members: stop its consumers first",
        "GROUP_ID_NOT_FOUND": "no such group"}


def _delete(args: argparse.Namespace) -> int:
    from kcodec.client import Admin

    with Admin(**client_config(args)) as admin:
        result = admin.delete_groups(list(dict.fromkeys(args.groups)))
        known = [g.group_id for g in admin.list_groups()] \
            if any(e is not None for e in result.values()) else []
    failed = 0
    for gid, err in result.items():
        failed += err is not None
        why = "" if err is None else _WHY.get(err.name, err.message or "")
        near = did_you_mean(gid, known) if err is not None and err.name == "GROUP_ID_NOT_FOUND" else ""
        if args.json:
            json_line({"group": gid, "ok": err is None, "error": None if err is None else err.name,
                       "message": (why + near) or None})
        elif err is None:
            print(f"{gid}: deleted")
        else:
            print(f"{gid}: {err.name}" + (f": {why}{near}" if why or near else ""))
    return 1 if failed else 0


def parse_when(text: str) -> int:
    """``--to-datetime``'s value as milliseconds since the epoch."""
    import datetime as dt

    if text.lstrip("-").isdigit():
        return int(text)
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--to-datetime {text!r}: not YYYY-MM-DDTHH:MM:SS[.sss][zone] nor "
                         "milliseconds since the epoch") from None
    if when.tzinfo is None:
        when = when.astimezone()                  # local time, as Kafka's tool takes it
    return int(when.timestamp() * 1000)


def _topics(specs: list[str]) -> dict[str, list[int] | None]:
    out: dict[str, list[int] | None] = {}
    for spec in specs:
        name, sep, parts = spec.partition(":")
        if not name:
            raise UsageError(f"-t {spec!r}: no topic name")
        if not sep:
            out[name] = None
            continue
        try:
            ps = [int(p) for p in parts.split(",") if p.strip()]
        except ValueError:
            raise UsageError(f"-t {spec!r}: partitions are numbers, as in {name}:0,1") from None
        if not ps or any(p < 0 for p in ps):
            raise UsageError(f"-t {spec!r}: give partitions as {name}:0,1")
        have = out.get(name, [])
        out[name] = None if name in out and have is None else sorted(set((have or []) + ps))
    return out


def _reset(args: argparse.Namespace) -> int:
    import sys

    from kcodec.cli._client import require_topics
    from kcodec.client import Admin

    if bool(args.topic) == args.all_topics:
        raise UsageError("give the partitions: -t TOPIC[:P,...] (repeatable) or --all-topics")
    topics = _topics(args.topic) if args.topic else None
    when = parse_when(args.to_datetime) if args.to_datetime is not None else None
    with Admin(**client_config(args)) as admin:
        if topics:
            require_topics(admin, sorted(topics))   # a missing topic: named, with a near one
        plan = admin.reset_consumer_group_offsets(
            args.group, topics, to_earliest=args.to_earliest, to_latest=args.to_latest,
            to_offset=args.to_offset, to_datetime=when, shift_by=args.shift_by,
            execute=args.execute)
    if not args.execute and not args.dry_run:
        print("kcodec groups reset-offsets: nothing was changed (a dry run): --execute commits "
              "these offsets", file=sys.stderr)
    if not plan:
        print(f"kcodec groups reset-offsets: group {args.group!r} has no committed offsets: "
              "name the partitions with -t", file=sys.stderr)
        return 1
    failed = [r for r in plan if r.error is not None]
    if args.json:
        for r in plan:
            json_line({"group": args.group, "topic": r.topic, "partition": r.partition,
                       "current_offset": r.current, "new_offset": r.new,
                       "committed": args.execute and r.error is None,
                       "error": None if r.error is None else r.error.name})
    else:
        table(["group", "topic", "partition", "current-offset", "new-offset"] +
              (["error"] if failed else []),
              [[args.group, r.topic, r.partition, "-" if r.current is None else r.current, r.new]
               + ([r.error.name if r.error else ""] if failed else []) for r in plan])
    return 1 if failed else 0
