"""Stand-ins for Kafka's ``kafka-topics.sh`` and ``kafka-acls.sh``, on kcodec's ``Admin`` and
CLI, for the librdkafka tests that shell out to them (the harness puts them in
``$KAFKA_PATH/bin``). Only the options those tests use are understood; anything else is an
error, so a test that needs more fails loudly instead of passing by accident.

    python -m tools.conformance.kafka_scripts kafka-topics --bootstrap-server B --create ...
    python -m tools.conformance.kafka_scripts kafka-acls --bootstrap-server B --add ...
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence


def _topics(argv: Sequence[str]) -> int:
    from kcodec.client import Admin
    from kcodec.client.admin import NewTopic
    from kcodec.client.errors import KafkaError
    from kcodec.protocol import CreatePartitionsRequest

    p = argparse.ArgumentParser(prog="kafka-topics.sh")
    p.add_argument("--bootstrap-server", required=True)
    act = p.add_mutually_exclusive_group(required=True)
    for name in ("create", "delete", "alter", "list"):
        act.add_argument(f"--{name}", action="store_true")
    p.add_argument("--topic")
    p.add_argument("--partitions", type=int, default=-1)
    p.add_argument("--replication-factor", type=int, default=-1)
    p.add_argument("--config", action="append", default=[])
    a = p.parse_args(argv)
    if not a.list and not a.topic:
        p.error("--topic is required")
    configs = {}
    for kv in a.config:
        k, sep, v = kv.partition("=")
        if not sep:
            p.error(f"--config {kv!r}: NAME=VALUE")
        configs[k] = v
    with Admin(bootstrap_servers=a.bootstrap_server) as admin:
        if a.list:
            print("\n".join(admin.list_topics()))
            return 0
        if a.create:
            errors = admin.create_topics([NewTopic(a.topic, a.partitions, a.replication_factor, configs)])
        elif a.delete:
            errors = admin.delete_topics([a.topic])
        else:
            if a.partitions < 1 or configs:
                p.error("--alter: only --partitions N is supported")
            C = CreatePartitionsRequest
            req = C(topics=[C.CreatePartitionsTopic(name=a.topic, count=a.partitions, assignments=None)],
                    timeout_ms=30000, validate_only=False)
            inner = admin._async

            async def go() -> object:
                return await inner.cluster.request(await inner._controller(), req, 1)
            body = admin._run(inner.cluster.call(go, "CreatePartitions"))
            errors = {r.name: (KafkaError(r.error_code, f"add partitions to {r.name!r}",
                                          r.error_message) if r.error_code else None)
                      for r in body.results}
    bad = {t: e for t, e in errors.items() if e is not None}
    for t, e in bad.items():
        print(f"Error for topic {t}: {e}", file=sys.stderr)
    return 1 if bad else 0


def _acls(argv: Sequence[str]) -> int:
    """kafka-acls.sh --add / --remove / --list on Admin (the CLI's parser imports every
    sub-command, seconds on a loaded machine, and librdkafka's tests time out)."""
    from kcodec.client import Admin
    from kcodec.protocol.acl import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourceType,
    )

    p = argparse.ArgumentParser(prog="kafka-acls.sh")
    p.add_argument("--bootstrap-server", required=True)
    act = p.add_mutually_exclusive_group(required=True)
    for name in ("add", "remove", "list"):
        act.add_argument(f"--{name}", action="store_true")
    p.add_argument("--force", action="store_true")
    for opt in ("allow-principal", "deny-principal", "allow-host", "deny-host", "operation",
                "topic", "group", "transactional-id"):
        p.add_argument(f"--{opt}", action="append", default=[])
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--resource-pattern-type", default="literal")
    a = p.parse_args(argv)
    resources = ([(ResourceType.TOPIC, n) for n in a.topic]
                 + [(ResourceType.GROUP, n) for n in a.group]
                 + [(ResourceType.TRANSACTIONAL_ID, n) for n in a.transactional_id]
                 + ([(ResourceType.CLUSTER, "kafka-cluster")] if a.cluster else []))
    pattern = PatternType.parse(a.resource_pattern_type)
    # Kafka's names (DescribeConfigs, All) and kcodec's (DESCRIBE_CONFIGS) are one enum
    ops = [AclOperation.parse(re.sub(r"(?<!^)(?=[A-Z])", "_", op) if op[:1].isupper()
                              and not op.isupper() else op) for op in a.operation]
    who = ([(pr, AclPermissionType.ALLOW, a.allow_host or ["*"]) for pr in a.allow_principal]
           + [(pr, AclPermissionType.DENY, a.deny_host or ["*"]) for pr in a.deny_principal])
    with Admin(bootstrap_servers=a.bootstrap_server) as admin:
        if a.list:
            for acl in admin.describe_acls(AclBindingFilter()):
                print(acl)
            return 0
        if not resources or not who:
            p.error("a resource (--topic, --group, ...) and a principal are needed")
        if a.add:
            bindings = [AclBinding(rt, name, pattern, pr, host, op, perm)
                        for rt, name in resources for pr, perm, hosts in who for host in hosts
                        for op in ops or [AclOperation.ALL]]
            errors = admin.create_acls(bindings)
            bad = [f"{b}: {e}" for b, e in errors.items() if e is not None]
        else:
            filters = [AclBindingFilter(rt, name, pattern, pr, host, op, perm)
                       for rt, name in resources for pr, perm, hosts in who for host in hosts
                       for op in ops or [AclOperation.ANY]]
            admin.delete_acls(filters)      # (an error raises)
            bad = []
    for line in bad:
        print(f"Error: {line}", file=sys.stderr)
    return 1 if bad else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("kafka-topics", "kafka-acls"):
        print("usage: kafka_scripts {kafka-topics|kafka-acls} ARGS...", file=sys.stderr)
        return 2
    return (_topics if args[0] == "kafka-topics" else _acls)(args[1:])


if __name__ == "__main__":
    sys.exit(main())
