"""``kcodec configs describe|alter``: topic, broker and group configs with kafka-configs.sh's
vocabulary.

    kcodec configs describe --topic events             # the topic's own configs
    kcodec configs describe --topic events --all       # every config, defaults too
    kcodec configs describe --broker 0 --all           # a broker's configs and sources
    kcodec configs alter --topic events --add-config retention.ms=86400000,cleanup.policy=[compact,delete]
    kcodec configs alter --broker-defaults --add-config log.retention.ms=3600000
    kcodec configs alter --group orders --delete-config consumer.session.timeout.ms
    kcodec configs alter --topic events --append-config cleanup.policy=compact

The entity may also be named as kafka-configs.sh names it (``--entity-type topics
--entity-name events``, ``--entity-type brokers --entity-default``). ``alter`` sends one
IncrementalAlterConfigs: ``--add-config`` sets, ``--delete-config`` removes an override,
``--append-config`` / ``--subtract-config`` change a list config. Exit code 1 when the
broker refuses, with its message.
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

NAME = "configs"
HELP = "describe and alter topic, broker and group configs (kafka-configs.sh's options)"
EXAMPLES = [
    "kcodec configs describe --topic events --all",
    "kcodec configs alter --topic events --add-config retention.ms=86400000",
    "kcodec configs alter --broker-defaults --add-config log.retention.ms=3600000",
]
ACTIONS = {"describe": "a topic's, broker's or group's configs (--all: defaults too)",
           "alter": "set (--add-config), delete, append to or subtract from configs"}
_ENTITY_TYPES = {"topics": "topic", "brokers": "broker", "groups": "group",
                 "broker-loggers": "broker_logger", "client-metrics": "client_metrics"}


def _entity(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("the entity (one of)")
    g.add_argument("--topic", metavar="NAME", help="a topic")
    g.add_argument("--broker", metavar="ID", help="a broker by id")
    g.add_argument("--broker-defaults", action="store_true",
                   help="the cluster-wide broker defaults (resource name \"\")")
    g.add_argument("--group", metavar="NAME", help="a consumer or share group")
    g.add_argument("--entity-type", choices=sorted(_ENTITY_TYPES),
                   help="as kafka-configs.sh: the entity's type")
    g.add_argument("--entity-name", metavar="NAME", help="as kafka-configs.sh: its name")
    g.add_argument("--entity-default", action="store_true",
                   help="as kafka-configs.sh: the default entity (brokers: \"\")")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    p = sub.add_parser("describe", help=ACTIONS["describe"])
    _entity(p)
    p.add_argument("--all", action="store_true",
                   help="every config, defaults included (default: the ones set)")
    p.add_argument("--synonyms", action="store_true", help="list each config's synonyms")
    add_connection(p)
    p = sub.add_parser("alter", help=ACTIONS["alter"])
    _entity(p)
    p.add_argument("--add-config", action="append", default=[], metavar="K=V,K=[A,B]",
                   help="configs to set, as kafka-configs.sh: comma-separated K=V, a list "
                        "value in brackets (repeatable)")
    p.add_argument("--delete-config", action="append", default=[], metavar="K,K",
                   help="overrides to remove (repeatable)")
    p.add_argument("--append-config", action="append", default=[], metavar="K=V",
                   help="items to add to a list config (repeatable)")
    p.add_argument("--subtract-config", action="append", default=[], metavar="K=V",
                   help="items to take from a list config (repeatable)")
    p.add_argument("--validate-only", action="store_true",
                   help="ask the broker to check the change without making it")
    add_connection(p)


def _resource(args: argparse.Namespace) -> tuple[str, str]:
    given = []
    if args.topic is not None:
        given.append(("topic", args.topic))
    if args.broker is not None:
        given.append(("broker", args.broker))
    if args.broker_defaults:
        given.append(("broker", ""))
    if args.group is not None:
        given.append(("group", args.group))
    if args.entity_type is not None:
        if (args.entity_name is None) == (not args.entity_default):
            raise UsageError("--entity-type needs --entity-name or --entity-default")
        kind = _ENTITY_TYPES[args.entity_type]
        if args.entity_default and kind != "broker":
            raise UsageError("--entity-default is the brokers' cluster-wide default only")
        given.append((kind, "" if args.entity_default else args.entity_name))
    elif args.entity_name is not None or args.entity_default:
        raise UsageError("--entity-name and --entity-default need --entity-type")
    if len(given) != 1:
        raise UsageError("name one entity: --topic, --broker, --broker-defaults, --group or "
                         "--entity-type with --entity-name")
    return given[0]


def split_configs(text: str) -> list[tuple[str, str]]:
    """kafka-configs.sh's ``K=V,K2=[A,B]``: pairs, a bracketed value keeping its commas."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        eq = text.find("=", i)
        if eq < 0:
            raise UsageError(f"{text!r}: expected K=V pairs separated by commas")
        key = text[i:eq].strip()
        j = eq + 1
        if j < n and text[j] == "[":
            end = text.find("]", j)
            if end < 0:
                raise UsageError(f"{text!r}: a '[' without its ']'")
            value, i = text[j + 1:end], end + 1
            if i < n and text[i] != ",":
                raise UsageError(f"{text!r}: expected ',' after ']'")
            i += 1
        else:
            end = text.find(",", j)
            end = n if end < 0 else end
            value, i = text[j:end], end + 1
        if not key:
            raise UsageError(f"{text!r}: a config without a name")
        out.append((key, value))
    return out


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.client import Admin
    from kcodec.client.admin import AlterConfigOp, ConfigResource

    if args.action is None:
        return which_one(args.command, ACTIONS)
    res = ConfigResource(*_resource(args))
    if args.action == "describe":
        with Admin(**client_config(args)) as admin:
            entries = admin.describe_configs([res])[res]
        shown = [e for e in entries.values() if args.all or not e.is_default]
        if args.json:
            for e in shown:
                json_line({"name": e.name, "value": e.value, "source": e.source,
                           "read_only": e.read_only, "sensitive": e.sensitive,
                           "synonyms": [list(s) for s in e.synonyms]})
        else:
            rows = []
            for e in shown:
                rows.append((e.name, "(sensitive)" if e.sensitive else e.value, e.source,
                             "yes" if e.read_only else ""))
                if args.synonyms:
                    rows += [(f"  {n}", v, s, "") for n, v, s in e.synonyms]
            table(["config", "value", "source", "read-only"], rows)
        return 0
    ops: list[AlterConfigOp] = []
    for spec in args.add_config:
        ops += [AlterConfigOp(k, v, "set") for k, v in split_configs(spec)]
    for spec in args.delete_config:
        ops += [AlterConfigOp(k.strip(), None, "delete") for k in spec.split(",") if k.strip()]
    for flag, op in ((args.append_config, "append"), (args.subtract_config, "subtract")):
        for spec in flag:
            ops += [AlterConfigOp(k, v, op) for k, v in split_configs(spec)]
    if not ops:
        raise UsageError("nothing to change: give --add-config, --delete-config, "
                         "--append-config or --subtract-config")
    names = [o.name for o in ops]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"{', '.join(twice)} given more than once")
    with Admin(**client_config(args)) as admin:
        err = admin.incremental_alter_configs({res: ops}, args.validate_only)[res]
    what = f"{res.type} {res.name!r}" if res.name else "the broker defaults"
    if args.json:
        json_line({"type": res.type, "name": res.name, "ok": err is None,
                   "error": None if err is None else err.name,
                   "message": None if err is None else err.message})
    elif err is None:
        verb = "valid" if args.validate_only else "altered"
        print(f"{what}: {verb} ({len(ops)} config(s))")
    else:
        said = f": {err.message}" if err.message else ""
        print(f"{what}: {err.name}{said}")
    return 0 if err is None else 1
