"""``kcodec offsets -g GROUP``: committed offset, end offset and remaining per partition."""

from __future__ import annotations

import argparse

from kcodec.cli._client import (
    Once,
    add_connection,
    client_config,
    group_exists,
    guarded,
    json_line,
    required,
    table,
)
from kcodec.errors import KcodecError

NAME = "offsets"
HELP = "committed offset, end offset and remaining records per partition of a group"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    required(parser).add_argument("-g", "--group", action=Once, required=True, help="group id")
    parser.add_argument("-t", "--topic", action="append", help="only this topic (repeatable)")
    add_connection(parser)


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.client import Admin

    with Admin(**client_config(args)) as admin:
        if not group_exists(admin, args.group):
            raise KcodecError(f"group {args.group!r} does not exist")
        lags = admin.lag(args.group, args.topic)
    if args.json:
        for x in lags:
            json_line({"topic": x.topic, "partition": x.partition, "committed": x.committed,
                       "end_offset": x.end_offset, "remaining": x.lag})
    else:
        table(["topic", "partition", "committed", "end offset", "remaining"],
              [(x.topic, x.partition, "-" if x.committed is None else x.committed, x.end_offset, x.lag)
               for x in lags])
    return 0
