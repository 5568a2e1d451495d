"""``kcodec acls list|add|remove``: ACLs with kafka-acls.sh's vocabulary (the options and
the work are in ``kcodec.cli._acls``, imported when the command runs)."""

from __future__ import annotations

import argparse

NAME = "acls"
HELP = "list, add and remove ACLs (kafka-acls.sh's options)"
EXAMPLES = [
    "kcodec acls list --topic orders --resource-pattern-type match",
    "kcodec acls add --allow-principal User:alice --operation read --topic orders --group reports",
    "kcodec acls add --allow-principal User:alice --producer --topic alice- "
    "--resource-pattern-type prefixed",
    "kcodec acls remove --allow-principal User:alice --topic orders",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kcodec.cli._acls import add_arguments as add

    add(parser)


def run(args: argparse.Namespace) -> int:
    from kcodec.cli._acls import run as run_acls

    return run_acls(args)
