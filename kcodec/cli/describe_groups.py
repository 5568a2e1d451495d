"""``kcodec describe-groups -g GROUP``: state, protocol and members of consumer groups, and
of share groups (KIP-932: type share; several members may read one partition), with each
share partition's start offset (records before it are done for the group) and the
records after it."""

from __future__ import annotations

import argparse
from typing import Any

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


EXAMPLES = [
    "kcodec describe-groups -g reports",
    "kcodec describe-groups -g reports --json",
]
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
        starts = {g.group_id: _share_starts(admin, g.group_id, args.topic)
                  for g in groups if g.type == "share"}
    for g in groups:
        members = []
        for m in g.members:
            parts = {t: ps for t, ps in m.assignment.items() if args.topic is None or t in args.topic}
            members.append((m, parts))
        if args.json:
            line = {"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type,
                    "protocol": g.protocol, "type": g.type,
                    "members": [{"member_id": m.member_id, "client_id": m.client_id,
                                 "host": m.host, "assignment": parts} for m, parts in members]}
            if g.group_id in starts:
                line["start_offsets"] = [{"topic": t, "partition": p, "start_offset": s,
                                          "end_offset": e} for t, p, s, e in starts[g.group_id]]
            json_line(line)
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
        if starts.get(g.group_id):
            print()
            table(["topic", "partition", "start offset", "end offset", "after start"],
                  [(t, p, "-" if s is None else s, e, "-" if s is None else max(e - s, 0))
                   for t, p, s, e in starts[g.group_id]])
    return 0


def _share_starts(admin: Any, group_id: str, topics: list[str] | None
                  ) -> list[tuple[str, int, int | None, int]]:
    """(topic, partition, start offset, end offset) of a share group's partitions."""
    starts = admin.list_share_group_offsets(group_id)
    tps = sorted(tp for tp in starts if topics is None or tp.topic in topics)
    ends = admin.list_offsets(tps, "latest") if tps else {}
    return [(tp.topic, tp.partition, starts[tp], ends.get(tp, -1)) for tp in tps]
