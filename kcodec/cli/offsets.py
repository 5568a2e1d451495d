"""``kcodec offsets -g GROUP``: committed offset, end offset and remaining per partition.

The partitions are those assigned to the group's members and those it committed offsets
for (see ``_groups``); where nothing is committed yet, committed and remaining are ``-``
(``null`` in JSON).
"""

from __future__ import annotations

import argparse
import sys

from kcodec.cli._client import (
    Once,
    add_connection,
    client_config,
    guarded,
    json_line,
    require_topics,
    required,
    table,
)

NAME = "offsets"
HELP = "committed offset, end offset and remaining records per partition of a group"


EXAMPLES = [
    "kcodec offsets -g reports",
    "kcodec offsets -g reports -t events --json",
]
def add_arguments(parser: argparse.ArgumentParser) -> None:
    required(parser).add_argument("-g", "--group", action=Once, required=True, help="group id")
    parser.add_argument("-t", "--topic", action="append", help="only this topic (repeatable)")
    add_connection(parser)


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.cli._groups import describe, partition_offsets, why_none
    from kcodec.client import Admin

    topics = None if not args.topic else list(dict.fromkeys(args.topic))
    with Admin(**client_config(args)) as admin:
        if topics:
            require_topics(admin, topics)
        (group,) = describe(admin, [args.group])
        rows = partition_offsets(admin, group, topics)
    if not rows:
        print(f"kcodec offsets: group {args.group!r}: {why_none(group, topics)}", file=sys.stderr)
    if args.json:
        for x in rows:
            json_line({"topic": x.topic, "partition": x.partition, "committed": x.committed,
                       "end_offset": x.end_offset, "remaining": x.lag})
    elif rows:
        table(["topic", "partition", "committed", "end offset", "remaining"],
              [(x.topic, x.partition, "-" if x.committed is None else x.committed, x.end_offset,
                "-" if x.lag is None else x.lag) for x in rows])
    return 0
