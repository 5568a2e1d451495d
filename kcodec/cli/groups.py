"""``kcodec groups list``: the groups the brokers know (ListGroups, from every broker)."""

from __future__ import annotations

import argparse

from kcodec.cli._client import add_connection, client_config, guarded, json_line, table, which_one

NAME = "groups"
HELP = "list the consumer and share groups the brokers know"
EXAMPLES = [
    "kcodec groups list",
]
ACTIONS = {"list": "each group with its type, state and protocol type (ListGroups)"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    p = sub.add_parser("list", help=ACTIONS["list"], description=ACTIONS["list"] + "; a value "
                       "the broker does not give (old brokers: type and state) shows as '-', "
                       "null in JSON")
    add_connection(p)


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.client import Admin

    if args.action is None:
        return which_one(args.command, ACTIONS)
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
