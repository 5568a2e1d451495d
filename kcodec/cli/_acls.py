"""``kcodec acls list|add|remove``: ACLs with kafka-acls.sh's vocabulary.

    kcodec acls add --allow-principal User:alice --operation read --operation describe \
        --topic orders --group reports
    kcodec acls add --allow-principal User:alice --producer --topic alice- \
        --resource-pattern-type prefixed
    kcodec acls list [--topic orders --resource-pattern-type match] [--principal User:bob]
    kcodec acls remove --allow-principal User:alice --topic orders

A resource is ``--topic``, ``--group``, ``--transactional-id`` (each repeatable) or
``--cluster``; ``--resource-pattern-type`` is literal (default) or prefixed for add, also
any or match for list and remove (match: every ACL that applies to the named resource).
Principals are ``Type:name`` (``User:*`` for everyone); hosts default to ``*``;
``--operation`` (repeatable) defaults to all for add and to any for list and remove.
``--producer`` and ``--consumer`` add what those clients need, as kafka-acls.sh does.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kcodec.cli._client import (
    UsageError,
    add_connection,
    client_config,
    guarded,
    json_line,
    table,
    which_one,
)
from kcodec.protocol.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

ACTIONS = {"list": "the ACLs, all or those matching the options (DescribeAcls)",
           "add": "create ACLs for the principals, operations and resources given (CreateAcls)",
           "remove": "delete the ACLs matching the options (DeleteAcls)"}

_OPS = ", ".join(o.name.lower().replace("_", "-") for o in AclOperation
                 if o not in (AclOperation.UNKNOWN, AclOperation.ANY))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    for action, text in ACTIONS.items():
        p = sub.add_parser(action, help=text, description=text)
        g = p.add_argument_group("resources")
        g.add_argument("--topic", action="append", default=[], metavar="NAME",
                       help="a topic (repeatable; * for every topic)")
        g.add_argument("--group", action="append", default=[], metavar="NAME",
                       help="a consumer group (repeatable)")
        g.add_argument("--transactional-id", action="append", default=[], metavar="ID",
                       help="a transactional id (repeatable)")
        g.add_argument("--cluster", action="store_true", help="the cluster resource")
        kinds = "literal, prefixed" if action == "add" else "literal, prefixed, any, match"
        g.add_argument("--resource-pattern-type", default=None, metavar="TYPE",
                       help=f"{kinds} (default: literal"
                            + (")" if action == "add" else "; without a resource: any)"))
        w = p.add_argument_group("who and what")
        w.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME")
        w.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
        w.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                       help="(default: * for add)")
        w.add_argument("--deny-host", action="append", default=[], metavar="HOST",
                       help="(default: * for add)")
        w.add_argument("--operation", action="append", default=[], metavar="OP",
                       help=f"repeatable: {_OPS} (default: all for add, any otherwise)")
        if action == "add":
            w.add_argument("--producer", action="store_true",
                           help="write, describe and create on the topics; idempotent-write "
                                "on the cluster; write and describe on transactional ids")
            w.add_argument("--consumer", action="store_true",
                           help="read and describe on the topics, read on the groups")
        else:
            w.add_argument("--principal", action="append", default=[], metavar="TYPE:NAME",
                           help="only ACLs of this principal, allowed or denied")
        add_connection(p)


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in args.topic]
    out += [(ResourceType.GROUP, g) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _parse(kind: Any, text: str, option: str) -> Any:
    try:
        return kind.parse(text)
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}") from None


def _pattern(args: argparse.Namespace, allowed: tuple[PatternType, ...], default: PatternType
             ) -> PatternType:
    if args.resource_pattern_type is None:
        return default
    p = _parse(PatternType, args.resource_pattern_type, "--resource-pattern-type")
    if p not in allowed:
        raise UsageError(f"--resource-pattern-type {args.resource_pattern_type} is not for "
                         f"{args.action} (one of {', '.join(a.name.lower() for a in allowed)})")
    return p


def _who(args: argparse.Namespace, hosts_default: list[Any]) -> list[tuple[AclPermissionType, str, Any]]:
    """(permission, principal, host) of the --allow-*/--deny-* options."""
    out = []
    for perm, principals, hosts in ((AclPermissionType.ALLOW, args.allow_principal, args.allow_host),
                                    (AclPermissionType.DENY, args.deny_principal, args.deny_host)):
        if hosts and not principals:
            raise UsageError(f"--{perm.name.lower()}-host needs --{perm.name.lower()}-principal")
        for p in principals:
            for h in hosts or hosts_default:
                out.append((perm, p, h))
    return out


def _bindings(args: argparse.Namespace) -> list[AclBinding]:
    """The ACLs ``add`` creates."""
    resources = _resources(args)
    if not resources:
        raise UsageError("add needs a resource: --topic, --group, --transactional-id or --cluster")
    who = _who(args, ["*"])
    if not who:
        raise UsageError("add needs --allow-principal or --deny-principal")
    pattern = _pattern(args, (PatternType.LITERAL, PatternType.PREFIXED), PatternType.LITERAL)
    ops = [_parse(AclOperation, o, "--operation") for o in args.operation]
    wanted: list[tuple[ResourceType, str, AclOperation]] = []
    if args.producer or args.consumer:
        if ops:
            raise UsageError("--operation does not go with --producer or --consumer")
        topics = [n for t, n in resources if t == ResourceType.TOPIC]
        if not topics:
            raise UsageError("--producer and --consumer need --topic")
        if args.producer:
            wanted += [(ResourceType.TOPIC, t, o) for t in topics
                       for o in (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)]
            wanted += [(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.IDEMPOTENT_WRITE)]
            wanted += [(ResourceType.TRANSACTIONAL_ID, n, o) for t, n in resources
                       if t == ResourceType.TRANSACTIONAL_ID
                       for o in (AclOperation.WRITE, AclOperation.DESCRIBE)]
        if args.consumer:
            groups = [n for t, n in resources if t == ResourceType.GROUP]
            if not groups:
                raise UsageError("--consumer needs --group")
            wanted += [(ResourceType.TOPIC, t, o) for t in topics
                       for o in (AclOperation.READ, AclOperation.DESCRIBE)]
            wanted += [(ResourceType.GROUP, g, AclOperation.READ) for g in groups]
    else:
        wanted = [(t, n, o) for t, n in resources for o in ops or [AclOperation.ALL]]
    out: list[AclBinding] = []
    for rtype, name, op in wanted:
        pat = PatternType.LITERAL if rtype == ResourceType.CLUSTER else pattern
        for perm, principal, host in who:
            acl = AclBinding(rtype, name, pat, principal, host, op, perm)
            why = acl.problem()
            if why is not None:
                raise UsageError(f"cannot add {acl}: {why}")
            if acl not in out:
                out.append(acl)
    return out


def _filters(args: argparse.Namespace) -> list[AclBindingFilter]:
    """The filters ``list`` and ``remove`` use."""
    resources = _resources(args)
    any_pattern = PatternType.ANY if not resources else PatternType.LITERAL
    pattern = _pattern(args, (PatternType.LITERAL, PatternType.PREFIXED, PatternType.ANY,
                              PatternType.MATCH), any_pattern)
    ops = [_parse(AclOperation, o, "--operation") for o in args.operation] or [AclOperation.ANY]
    who: list[tuple[AclPermissionType, str | None, str | None]] = list(_who(args, [None]))
    who += [(AclPermissionType.ANY, p, None) for p in args.principal]
    if not who:
        who = [(AclPermissionType.ANY, None, None)]
    if args.action == "remove" and not resources and not args.allow_principal \
            and not args.deny_principal and not args.principal:
        raise UsageError("remove needs a resource or a principal (it would remove every ACL)")
    targets: list[tuple[ResourceType, str | None]] = list(resources) or [(ResourceType.ANY, None)]
    out = []
    for rtype, name in targets:
        pat = PatternType.LITERAL if rtype == ResourceType.CLUSTER and pattern not in (
            PatternType.ANY, PatternType.MATCH) else pattern
        for op in ops:
            for perm, principal, host in who:
                f = AclBindingFilter(rtype, name, pat, principal, host, op, perm)
                if f not in out:
                    out.append(f)
    return out


def _row(a: AclBinding) -> dict[str, str]:
    return {"principal": a.principal, "host": a.host, "permission": a.permission.name.lower(),
            "operation": a.operation.name.lower().replace("_", "-"),
            "resource_type": a.resource_type.name.lower().replace("_", "-"),
            "pattern_type": a.pattern_type.name.lower(), "resource_name": a.resource_name}


def _show(acls: list[AclBinding], as_json: bool, status: dict[AclBinding, str] | None = None) -> None:
    acls = sorted(acls, key=lambda a: (a.resource_type, a.resource_name, a.pattern_type,
                                       a.principal, a.host, a.operation, a.permission))
    if as_json:
        for a in acls:
            row: dict[str, Any] = _row(a)
            if status is not None:
                row["error"] = status.get(a) or None
            json_line(row)
        return
    headers = ["principal", "host", "permission", "operation", "resource type", "pattern",
               "resource"]
    rows = [list(_row(a).values()) for a in acls]
    if status is not None:
        headers.append("result")
        rows = [r + [status.get(a) or "ok"] for r, a in zip(rows, acls, strict=False)]
    table(headers, rows)


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.client import Admin

    if args.action is None:
        return which_one(args.command, ACTIONS)
    if args.action == "add":
        acls = _bindings(args)
        with Admin(**client_config(args)) as admin:
            result = admin.create_acls(acls)
        status = {a: (str(e) if e is not None else "") for a, e in result.items()}
        _show(acls, args.json, status)
        failed = [e for e in result.values() if e is not None]
        if failed:
            print(f"kcodec acls: error: {len(failed)} of {len(acls)} ACLs not created: "
                  f"{failed[0]}", file=sys.stderr)
            return 1
        return 0
    filters = _filters(args)
    with Admin(**client_config(args)) as admin:
        if args.action == "list":
            seen: list[AclBinding] = []
            for f in filters:
                seen += [a for a in admin.describe_acls(f) if a not in seen]
            _show(seen, args.json)
            return 0
        removed = admin.delete_acls(filters)
    gone: list[AclBinding] = []
    for acls in removed.values():
        gone += [a for a in acls if a not in gone]
    _show(gone, args.json)
    if not args.json:
        print(f"removed {len(gone)} ACL{'s' if len(gone) != 1 else ''}", file=sys.stderr)
    return 0
