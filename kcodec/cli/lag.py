"""``kcodec lag -g GROUP``: the records a group has still to consume, in total."""

from __future__ import annotations

import argparse

from kcodec.cli._client import (
    add_connection,
    client_config,
    group_exists,
    guarded,
    json_line,
    required,
)
from kcodec.errors import KcodecError

NAME = "lag"
HELP = "total records a group has left to consume"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    required(parser).add_argument("-g", "--group", action="append", required=True,
                                  help="group id (repeatable: one line per group)")
    parser.add_argument("-t", "--topic", action="append", help="only this topic (repeatable)")
    add_connection(parser)


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.client import Admin

    groups = list(dict.fromkeys(args.group))
    with Admin(**client_config(args)) as admin:
        missing = [g for g in groups if not group_exists(admin, g)]
        if missing:
            raise KcodecError(", ".join(f"group {g!r}" for g in missing) + " does not exist")
        results = [(g, admin.lag(g, args.topic)) for g in groups]
    for group, lags in results:
        total = sum(x.lag for x in lags)
        if args.json:
            json_line({"group": group, "lag": total, "partitions": len(lags)})
        else:
            print(f"{group}: lag {total} ({len(lags)} partitions)")
    return 0
