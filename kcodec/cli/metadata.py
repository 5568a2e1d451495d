"""``kcodec metadata brokers|topics``: the cluster as the brokers describe it."""

from __future__ import annotations

import argparse

from kcodec.cli._client import (
    UsageError,
    add_connection,
    client_config,
    guarded,
    json_line,
    require_topics,
    table,
    which_one,
)

NAME = "metadata"
HELP = "show brokers, or topics with partitions, leaders, replicas and ISR"
EXAMPLES = [
    "kcodec metadata brokers",
    "kcodec metadata topics -t events",
]
WHAT = {"brokers": "node, host, port, rack and controller of each broker",
        "topics": "each partition's leader, replicas and ISR (-t TOPIC: only those)"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # a positional rather than sub-parsers: the options may come before or after it
    parser.add_argument("what", nargs="?", choices=list(WHAT), metavar="{brokers,topics}",
                        help="; ".join(f"{k}: {v}" for k, v in WHAT.items()))
    parser.add_argument("-t", "--topic", action="append",
                        help="only this topic (repeatable; metadata topics only)")
    add_connection(parser)


def _ids(xs: list[int]) -> str:
    return ",".join(map(str, xs))


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.client import Admin

    if args.what is None:
        return which_one(args.command, WHAT, options_each=False)
    if args.what == "brokers" and args.topic:
        raise UsageError("-t/--topic applies to 'metadata topics', not to 'metadata brokers'")
    with Admin(**client_config(args)) as admin:
        md = require_topics(admin, args.topic) if args.topic else admin.describe_cluster()
    if args.what == "brokers":
        if args.json:
            for b in md.brokers:
                json_line({"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
                           "controller": b.node_id == md.controller_id, "cluster_id": md.cluster_id})
        else:
            table(["node", "host", "port", "rack", "controller"],
                  [(b.node_id, b.host, b.port, b.rack or "", "yes" if b.node_id == md.controller_id else "")
                   for b in md.brokers])
        return 0
    rows = [(t.name, p.partition, p.leader, p.replicas, p.isr) for t in md.topics for p in t.partitions]
    if args.json:
        for name, part, leader, replicas, isr in rows:
            json_line({"topic": name, "partition": part, "leader": leader,
                       "replicas": replicas, "isr": isr})
    else:
        table(["topic", "partition", "leader", "replicas", "isr"],
              [(n, p, lead, _ids(r), _ids(i)) for n, p, lead, r, i in rows])
    return 0
