"""``kcodec quotas describe|alter``: client quotas (KIP-546), as ``kafka-configs.sh
--entity-type users|clients|ips`` manages them.

    kcodec quotas describe                                   # every entity's quotas
    kcodec quotas describe --user alice
    kcodec quotas alter --user alice --add-config producer_byte_rate=1048576
    kcodec quotas alter --user-defaults --client app --add-config consumer_byte_rate=2048
    kcodec quotas alter --ip 10.0.0.7 --add-config connection_creation_rate=10
    kcodec quotas alter --user alice --delete-config producer_byte_rate

kcodec's broker keeps and describes client quotas but does not throttle by them (see the
config reference).
"""

from __future__ import annotations

import argparse

from kcodec.cli._client import (
    UsageError,
    add_connection,
    client_config,
    guarded,
    json_line,
    table,
    which_one,
)

NAME = "quotas"
HELP = "describe and alter client quotas (kafka-configs.sh --entity-type users|clients|ips)"
EXAMPLES = [
    "kcodec quotas describe --user alice",
    "kcodec quotas alter --user alice --add-config producer_byte_rate=1048576",
    "kcodec quotas alter --ip 10.0.0.7 --add-config connection_creation_rate=10",
]
ACTIONS = {"describe": "the quotas of the matching entities",
           "alter": "set (--add-config) or remove (--delete-config) quotas of one entity"}


def _entity_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("the entity")
    g.add_argument("--user", metavar="NAME", help="a user (principal name)")
    g.add_argument("--user-defaults", action="store_true", help="the default user")
    g.add_argument("--client", metavar="ID", dest="quota_client",
                   help="a client id (kafka-configs.sh's clients entity)")
    g.add_argument("--client-defaults", action="store_true", help="the default client id")
    g.add_argument("--ip", metavar="ADDRESS", help="a client address")
    g.add_argument("--ip-defaults", action="store_true", help="the default address")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    p = sub.add_parser("describe", help=ACTIONS["describe"])
    _entity_options(p)
    add_connection(p)
    p = sub.add_parser("alter", help=ACTIONS["alter"])
    _entity_options(p)
    p.add_argument("--add-config", action="append", default=[], metavar="K=V,K=V",
                   help="quotas to set (repeatable)")
    p.add_argument("--delete-config", action="append", default=[], metavar="K,K",
                   help="quotas to remove (repeatable)")
    add_connection(p)


def _entity(args: argparse.Namespace) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for etype, name, default in (("user", args.user, args.user_defaults),
                                 ("client-id", args.quota_client, args.client_defaults),
                                 ("ip", args.ip, args.ip_defaults)):
        if name is not None and default:
            flag = {"user": "--user", "client-id": "--client", "ip": "--ip"}[etype]
            raise UsageError(f"give {flag} or its defaults, not both")
        if name is not None or default:
            out[etype] = name
    return out


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.client import Admin

    if args.action is None:
        return which_one(args.command, ACTIONS)
    entity = _entity(args)
    if args.action == "describe":
        comps = [(t, "exact" if n is not None else "default", n) for t, n in entity.items()]
        with Admin(**client_config(args)) as admin:
            found = admin.describe_client_quotas(comps)
        rows = [(", ".join(f"{t}={'<default>' if n is None else n}" for t, n in e), k, v)
                for e, values in found.items() for k, v in sorted(values.items())]
        if args.json:
            for e, values in found.items():
                json_line({"entity": dict(e), "quotas": values})
        else:
            table(["entity", "quota", "value"], rows)
        return 0
    if not entity:
        raise UsageError("name the entity: --user, --client, --ip or their --*-defaults")
    ops: dict[str, float | None] = {}
    for spec in args.add_config:
        for pair in spec.split(","):
            k, eq, v = pair.partition("=")
            if not eq or not k.strip():
                raise UsageError(f"--add-config {pair!r} is not K=V")
            try:
                ops[k.strip()] = float(v)
            except ValueError:
                raise UsageError(f"--add-config {k.strip()}: {v!r} is not a number") from None
    for spec in args.delete_config:
        ops.update({k.strip(): None for k in spec.split(",") if k.strip()})
    if not ops:
        raise UsageError("nothing to change: give --add-config or --delete-config")
    with Admin(**client_config(args)) as admin:
        (err,) = admin.alter_client_quotas({tuple(sorted(entity.items())): ops}).values()
    what = ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in sorted(entity.items()))
    if args.json:
        json_line({"entity": entity, "ok": err is None, "error": None if err is None else err.name,
                   "message": None if err is None else err.message})
    elif err is None:
        print(f"{what}: altered ({len(ops)} quota(s))")
    else:
        print(f"{what}: {err.name}: {err.message}")
    return 0 if err is None else 1
