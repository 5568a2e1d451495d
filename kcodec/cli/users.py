"""``kcodec users list|set|delete``: SCRAM users of the brokers (KIP-554), as
``kafka-configs.sh --entity-type users`` manages them.

    kcodec users list                                     # every user and its mechanisms
    echo secret | kcodec users set alice --password-stdin # SCRAM-SHA-256 and -512
    kcodec users set alice --mechanism SCRAM-SHA-512 --password secret --iterations 8192
    kcodec users delete alice --mechanism SCRAM-SHA-256

The password is salted and hashed here; the brokers get only the salted credential. A user
set is usable for the next login at once. Each mechanism is one request (Kafka takes one
change per user and request).
"""

from __future__ import annotations

import argparse
import sys

from kcodec.cli._client import (
    UsageError,
    add_connection,
    client_config,
    guarded,
    json_line,
    table,
    which_one,
)

NAME = "users"
HELP = "list, set and delete SCRAM users (kafka-configs.sh --entity-type users)"
EXAMPLES = [
    "kcodec users list",
    "kcodec users set alice --password-stdin",
    "kcodec users delete alice --mechanism SCRAM-SHA-256",
]
ACTIONS = {"list": "SCRAM users and their mechanisms and iterations",
           "set": "set a user's SCRAM credentials from a password",
           "delete": "delete a user's SCRAM credentials"}
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    p = sub.add_parser("list", help=ACTIONS["list"])
    p.add_argument("names", nargs="*", metavar="USER", help="only these users")
    add_connection(p)
    for action in ("set", "delete"):
        p = sub.add_parser(action, help=ACTIONS[action])
        p.add_argument("name", metavar="USER")
        p.add_argument("--mechanism", action="append", choices=MECHANISMS, default=[],
                       help="the mechanism (repeatable; default both)")
        if action == "set":
            p.add_argument("--password", help="the password (visible to ps; prefer "
                                              "--password-stdin)")
            p.add_argument("--password-stdin", action="store_true",
                           help="read the password from the first line of stdin")
            p.add_argument("--iterations", type=int, default=4096,
                           help="PBKDF2 iterations, 4096..16384 (default 4096)")
        add_connection(p)


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.client import Admin
    from kcodec.client.admin import ScramDeletion, ScramUpsertion

    if args.action is None:
        return which_one(args.command, ACTIONS)
    if args.action == "list":
        with Admin(**client_config(args)) as admin:
            users = admin.describe_user_scram_credentials(args.names or None)
        if args.json:
            for u, creds in users.items():
                json_line({"user": u, "credentials": [{"mechanism": m, "iterations": i}
                                                      for m, i in creds]})
        else:
            table(["user", "mechanism", "iterations"],
                  [(u, m, i) for u, creds in users.items() for m, i in creds])
        return 0
    mechs = args.mechanism or list(MECHANISMS)
    changes: list = []
    if args.action == "set":
        if (args.password is None) == (not args.password_stdin):
            raise UsageError("give the password with --password or --password-stdin")
        password = args.password if args.password is not None else \
            sys.stdin.readline().rstrip("\r\n")
        if not password:
            raise UsageError("the password is empty")
        changes = [ScramUpsertion(args.name, m, password, args.iterations) for m in mechs]
    else:
        changes = [ScramDeletion(args.name, m) for m in mechs]
    err = None
    with Admin(**client_config(args)) as admin:
        for change in changes:     # one per request: Kafka takes one change per user
            err = admin.alter_user_scram_credentials([change]).get(args.name)
            if err is not None:
                break
    if args.json:
        json_line({"user": args.name, "ok": err is None,
                   "error": None if err is None else err.name,
                   "message": None if err is None else err.message})
    elif err is None:
        print(f"{args.name}: {'set' if args.action == 'set' else 'deleted'} "
              f"({', '.join(mechs)})")
    else:
        print(f"{args.name}: {err.name}: {err.message}" if err.message else
              f"{args.name}: {err.name}")
    return 0 if err is None else 1
