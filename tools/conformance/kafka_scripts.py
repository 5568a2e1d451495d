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


def _kebab(op: str) -> str:
    """Kafka's operation names (``DescribeConfigs``, ``All``) as kcodec's CLI spells them."""
    return re.sub(r"(?<!^)(?=[A-Z])", "-", op).lower()


def _acls(argv: Sequence[str]) -> int:
    from kcodec.cli import main as kcodec_main

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
    p.add_argument("--resource-pattern-type")
    a = p.parse_args(argv)
    action = "add" if a.add else "remove" if a.remove else "list"
    out = [action, "--bootstrap", a.bootstrap_server]
    for opt in ("allow_principal", "deny_principal", "allow_host", "deny_host", "topic", "group",
                "transactional_id"):
        for v in getattr(a, opt):
            out += [f"--{opt.replace('_', '-')}", v]
    for op in a.operation:
        out += ["--operation", _kebab(op)]
    if a.cluster:
        out.append("--cluster")
    if a.resource_pattern_type:
        out += ["--resource-pattern-type", a.resource_pattern_type.lower()]
    return kcodec_main(["acls", *out])


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("kafka-topics", "kafka-acls"):
        print("usage: kafka_scripts {kafka-topics|kafka-acls} ARGS...", file=sys.stderr)
        return 2
    return (_topics if args[0] == "kafka-topics" else _acls)(args[1:])


if __name__ == "__main__":
    sys.exit(main())
