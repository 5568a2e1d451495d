"""``kcodec lag -g GROUP``: the records a group has still to consume, in total.

The group's partitions are those assigned to its members and those it has committed
offsets for (see ``_groups``). The lag is counted where an offset is committed; partitions
with nothing committed yet are counted apart, with the sum of their end offsets.
"""

from __future__ import annotations

import argparse

from kcodec.cli._client import (
    add_connection,
    client_config,
    guarded,
    json_line,
    require_topics,
    required,
)

NAME = "lag"
HELP = "total records a group has left to consume"


EXAMPLES = [
    "kcodec lag -g reports",
    "kcodec lag -g reports -t events --json",
]
def add_arguments(parser: argparse.ArgumentParser) -> None:
    required(parser).add_argument("-g", "--group", action="append", required=True,
                                  help="group id (repeatable: one line per group)")
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
        groups = describe(admin, list(dict.fromkeys(args.group)))
        results = [(g, partition_offsets(admin, g, topics)) for g in groups]
    for g, rows in results:
        done = [r for r in rows if r.committed is not None]
        waiting = [r for r in rows if r.committed is None]
        lag = sum(r.lag or 0 for r in done) if done else None
        waiting_ends = sum(max(r.end_offset, 0) for r in waiting)
        if args.json:
            json_line({"group": g.group_id, "lag": lag, "partitions": len(rows),
                       "committed_partitions": len(done), "uncommitted_partitions": len(waiting),
                       "uncommitted_end_offsets": waiting_ends if waiting else None})
            continue
        if not rows:
            line = why_none(g, topics)
        elif not waiting:
            line = f"lag {lag} ({len(done)} partitions)"
        elif not done:
            line = (f"no committed offsets yet ({len(waiting)} partitions, end offsets total "
                    f"{waiting_ends})")
        else:
            line = (f"lag {lag} ({len(done)} partitions); no committed offsets yet on "
                    f"{len(waiting)} more (end offsets total {waiting_ends})")
        print(f"{g.group_id}: {line}")
    return 0
