"""``kcodec lag -g GROUP``: the records a group has still to consume, in total."""

from __future__ import annotations

import argparse

from kcodec.cli._client import UsageError, add_connection, client_config, guarded, json_line

NAME = "lag"
HELP = "total records a group has left to consume"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-g", "--group", help="group id (required)")
    parser.add_argument("-t", "--topic", action="append", help="only this topic (repeatable)")
    add_connection(parser)


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.client import Admin

    if not args.group:
        raise UsageError("a group is required (-g GROUP)")
    with Admin(**client_config(args)) as admin:
        lags = admin.lag(args.group, args.topic)
    total = sum(x.lag for x in lags)
    if args.json:
        json_line({"group": args.group, "lag": total, "partitions": len(lags)})
    else:
        print(f"{args.group}: lag {total} ({len(lags)} partitions)")
    return 0
