"""``kcodec describe-groups -g GROUP``: state, protocol and members of consumer groups."""

from __future__ import annotations

import argparse

from kcodec.cli._client import (
    add_connection,
    client_config,
    guarded,
    json_line,
    require_topics,
    required,
    table,
)

NAME = "describe-groups"
HELP = "show a group's state, protocol and members with their partitions"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    required(parser).add_argument("-g", "--group", action="append", required=True,
                                  help="group id (repeatable)")
    parser.add_argument("-t", "--topic", action="append",
                        help="only show partitions of this topic (repeatable)")
    add_connection(parser)


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.cli._groups import describe
    from kcodec.client import Admin

    with Admin(**client_config(args)) as admin:
        if args.topic:
            require_topics(admin, args.topic)
        groups = describe(admin, list(dict.fromkeys(args.group)))
    for g in groups:
        members = []
        for m in g.members:
            parts = {t: ps for t, ps in m.assignment.items() if args.topic is None or t in args.topic}
            members.append((m, parts))
        if args.json:
            json_line({"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type,
                       "protocol": g.protocol, "type": g.type,
                       "members": [{"member_id": m.member_id, "client_id": m.client_id,
                                    "host": m.host, "assignment": parts} for m, parts in members]})
            continue
        table(["group", "state", "protocol type", "protocol", "members"],
              [(g.group_id, g.state, g.protocol_type, g.protocol, len(g.members))])
        if members:
            print()
            rows = []
            for m, parts in members:
                if not parts:
                    rows.append((m.member_id, m.client_id, m.host, "", ""))
                for t, ps in sorted(parts.items()):
                    rows.append((m.member_id, m.client_id, m.host, t, ",".join(map(str, ps))))
            table(["member id", "client id", "host", "topic", "partitions"], rows)
    return 0
