"""``kcodec broker``: run a kcodec broker node (or a small cluster) until Ctrl-C.

    kcodec broker                                  # one node, memory, a free port
    kcodec broker --port 9092 --data-dir ./kdata   # on disk: restarts find their topics
    kcodec broker --nodes 3 --port 9092            # nodes on 9092, 9093, 9094
    kcodec broker --listeners PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9094 \
        --ssl-certfile cert.pem --ssl-keyfile key.pem --sasl-users users.txt
    kcodec broker --data-dir ./kdata --sasl-users users.txt --listeners SASL_PLAINTEXT://:9092 \
        --authorizer --super-users 'User:admin'        # ACLs, kept in the data dir
    kcodec broker --max-connections 1000 --max-connections-per-ip 50
    kcodec broker --config group.initial.rebalance.delay.ms=0 --config num.partitions=4
    kcodec broker --nodes 3 --config 'broker.rack=RACK{id}' \
        --config replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector
    kcodec broker --nodes 3 --racks a,a,b          # one rack per node, by node id

Prints the bootstrap address (``--json``: one JSON line) once it is serving; Ctrl-C or
SIGTERM stops it cleanly (logs flushed, marked clean). A development broker, not a
production Kafka.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from kcodec._gc import settle as settle_gc
from kcodec.cli._client import UsageError, guarded, json_line

NAME = "broker"
HELP = "run a local kcodec Kafka broker (one node or --nodes N) until Ctrl-C"


EXAMPLES = [
    "kcodec broker                         # one node on 127.0.0.1:9092, until Ctrl-C",
    "kcodec broker --nodes 3 --data-dir /tmp/kc   # three nodes, logs kept",
]
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=1, help="number of nodes (default 1)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0,
                        help="port of the first node, the next nodes take the following ports "
                             "(default: free ports)")
    parser.add_argument("--data-dir", metavar="DIR",
                        help="keep the logs in DIR (default: memory only)")
    parser.add_argument("--racks", metavar="RACK,RACK,...",
                        help="each node's broker.rack, one per node in node id order "
                             "(or --config 'broker.rack=RACK{id}': {id} is each node's id)")
    parser.add_argument("--partitions", type=int, default=1,
                        help="partitions of auto-created topics (default 1)")
    parser.add_argument("--no-auto-create", action="store_true",
                        help="do not create topics on first Metadata request")
    parser.add_argument("--processors", type=int, default=2,
                        help="network threads per node (default 2)")
    parser.add_argument("--handlers", type=int, default=4,
                        help="request handler threads per node (default 4)")
    parser.add_argument("--listeners", metavar="LIST",
                        help="NAME://host:port,... several listeners per node, each with its own "
                             "protocol (names PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL, or any "
                             "name given in --listener-security-protocol-map); replaces "
                             "--host/--port; TLS and SASL options apply to the listeners whose "
                             "protocol needs them")
    parser.add_argument("--listener-security-protocol-map", metavar="MAP",
                        help="NAME:PROTOCOL,... as Kafka's listener.security.protocol.map")
    parser.add_argument("--advertised-listeners", metavar="LIST",
                        help="NAME://host:port,... the addresses clients are told (port 0: the "
                             "bound port)")
    parser.add_argument("--group-consumer-migration-policy", default="bidirectional",
                        choices=("bidirectional", "upgrade", "downgrade", "disabled"),
                        help="classic <-> consumer protocol group conversion (Kafka's "
                             "group.consumer.migration.policy; default bidirectional)")
    parser.add_argument("--share-config", action="append", metavar="NAME=VALUE", default=[],
                        help="a share-group broker config (repeatable): "
                             "group.share.record.lock.duration.ms, "
                             "group.share.delivery.count.limit, their min/max bounds, "
                             "group.share.session.timeout.ms, "
                             "group.share.heartbeat.interval.ms, "
                             "group.share.partition.max.record.locks")
    parser.add_argument("--config", action="append", metavar="NAME=VALUE", default=[],
                        help="a broker config by Kafka's name (repeatable; Kafka's "
                             "--override), e.g. group.initial.rebalance.delay.ms=0; the "
                             "names and Kafka's defaults are in the config reference")
    g = parser.add_argument_group("authorization and limits")
    g.add_argument("--authorizer", action="store_true",
                   help="check every request against ACLs (Kafka's model; managed with any "
                        "admin client's create/describe/delete ACLs, kept in --data-dir): "
                        "without an ACL nothing is allowed but to super users")
    g.add_argument("--super-users", metavar="LIST", default="",
                   help="principals allowed everything, 'User:admin;User:ops' (Kafka's "
                        "super.users); needs --authorizer")
    g.add_argument("--allow-everyone-if-no-acl-found", action="store_true",
                   help="with --authorizer, allow what no ACL names a resource for (Kafka's "
                        "allow.everyone.if.no.acl.found; default: deny)")
    g.add_argument("--max-connections", type=int, metavar="N",
                   help="connections per node, every listener together (default: no limit)")
    g.add_argument("--max-connections-per-ip", type=int, metavar="N",
                   help="connections from one address (default: no limit; 0 with overrides: "
                        "only the hosts named there)")
    g.add_argument("--max-connections-per-ip-overrides", metavar="LIST",
                   help="other limits for some hosts, 'host:N,10.0.0.7:200'")
    parser.add_argument("--json", action="store_true", help="print the address as a JSON line")
    parser.add_argument("-v", "--verbose", action="store_true", help="log connections and errors")
    parser.add_argument("--metrics-port", type=int, metavar="P",
                        help="serve Prometheus metrics on http://HOST:P/metrics (0: a free "
                             "port; needs pip install 'kcodec[prometheus]')")
    parser.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST",
                        help="address of the metrics endpoint (default 127.0.0.1)")
    parser.add_argument("--client-metrics", action="append", default=[], metavar="SPEC",
                        help="a KIP-714 client metrics subscription, "
                             "NAME:metrics=PREFIX,...;interval.ms=N;match=client_id=REGEX "
                             "(metrics=* for all; repeatable)")
    from kcodec.cli._security import add_broker_security

    add_broker_security(parser)


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.broker import Cluster

    if args.nodes < 1:
        raise UsageError(f"--nodes must be at least 1, got {args.nodes}")
    if not 0 <= args.port <= 65535 - args.nodes + 1:
        raise UsageError(f"--port {args.port} out of range")
    if args.partitions < 1:
        raise UsageError(f"--partitions must be at least 1, got {args.partitions}")
    if args.verbose:
        import logging

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    ports = [args.port + i for i in range(args.nodes)] if args.port else None
    if args.processors < 1 or args.handlers < 1:
        raise UsageError("--processors and --handlers must be at least 1")
    if args.metrics_port is not None:
        if not 0 <= args.metrics_port <= 65535:
            raise UsageError(f"--metrics-port {args.metrics_port} out of range")
        try:
            import prometheus_client  # noqa: F401
        except ImportError:
            raise UsageError("--metrics-port needs prometheus_client: pip install "
                             "'kcodec[prometheus]'") from None
    from kcodec.cli._security import broker_security

    if (args.super_users.strip() or args.allow_everyone_if_no_acl_found) and not args.authorizer:
        raise UsageError("--super-users and --allow-everyone-if-no-acl-found need --authorizer")
    share: dict[str, str] = {}
    for item in args.share_config:
        name, eq, value = item.partition("=")
        if not eq or not value.strip().lstrip("-").isdigit():
            raise UsageError(f"--share-config {item!r}: give NAME=INTEGER, e.g. "
                             "group.share.record.lock.duration.ms=15000")
        share[name.strip()] = value.strip()
    config: dict[str, str] = {}
    for item in args.config:
        name, eq, value = item.partition("=")
        if not eq or not name.strip():
            raise UsageError(f"--config {item!r}: give NAME=VALUE, e.g. "
                             "group.initial.rebalance.delay.ms=0")
        config[name.strip()] = value
    common = dict(data_dir=args.data_dir, config=config, processors=args.processors, handlers=args.handlers,
                  share_group_configs=share,
                  num_partitions=args.partitions, auto_create_topics=not args.no_auto_create,
                  group_consumer_migration_policy=args.group_consumer_migration_policy,
                  authorizer=args.authorizer,
                  super_users=[u for u in args.super_users.split(";") if u.strip()],
                  allow_everyone_if_no_acl_found=args.allow_everyone_if_no_acl_found,
                  max_connections=args.max_connections,
                  max_connections_per_ip=args.max_connections_per_ip,
                  max_connections_per_ip_overrides=args.max_connections_per_ip_overrides,
                  client_metrics=_client_metrics(args.client_metrics),
                  racks=_racks(args.racks, args.nodes))
    if args.listeners:
        if args.port or args.host != "127.0.0.1":
            raise UsageError("--listeners replaces --host and --port; give one or the other")
        from kcodec.cli._security import listener_securities

        try:
            cluster = Cluster(args.nodes, listeners=args.listeners,
                              listener_security_protocol_map=args.listener_security_protocol_map,
                              advertised_listeners=args.advertised_listeners,
                              listener_security=listener_securities(args), **common)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    else:
        if args.listener_security_protocol_map or args.advertised_listeners:
            raise UsageError("--listener-security-protocol-map and --advertised-listeners "
                             "need --listeners")
        try:
            cluster = Cluster(args.nodes, host=args.host, ports=ports,
                              security=broker_security(args), **common)
        except ValueError as exc:      # e.g. an unknown --share-config name
            raise UsageError(str(exc)) from None
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()
    # SIGINT too, explicitly: a broker started in the background by a script inherits SIGINT
    # ignored, and Python then never raises KeyboardInterrupt for it
    old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    cluster.start()
    exporter = None
    try:
        metrics_url = None
        if args.metrics_port is not None:
            from kcodec.observe.prometheus import serve

            try:
                exporter = serve(args.metrics_port, addr=args.metrics_host, sources=lambda: [
                    n.metrics.registry for n in cluster.nodes.values()])
            except OSError as exc:
                raise UsageError(f"--metrics-port {args.metrics_port}: cannot listen on "
                                 f"{args.metrics_host}: {exc.strerror or exc}") from None
            metrics_url = f"http://{args.metrics_host}:{exporter.port}/metrics"
        listeners = {ls.name: cluster.bootstrap_for(ls.name) for ls in cluster.nodes[0].listeners}
        # a data dir left by a kill: say so, and what became of its open transactions
        unclean = bool(args.data_dir and cluster.state.topics
                       and not cluster.state.logs.clean_shutdown)
        with cluster.txns.lock:
            open_txns = sum(t.state == "Ongoing" for t in cluster.txns.txns.values())
        cuts = list(cluster.state.logs.truncations)      # damaged or torn segments cut
        if args.json:
            json_line({"bootstrap": cluster.bootstrap, "nodes": args.nodes,
                       "storage": args.data_dir or "memory", "listeners": listeners,
                       "unclean_restart": unclean, "open_transactions": open_txns,
                       "truncated": [{"topic": c.topic, "partition": c.partition,
                                      "offset": c.offset, "bytes": c.total_bytes,
                                      "below_recovery_point": c.below_recovery_point}
                                     for c in cuts],
                       "metrics": metrics_url})
        else:
            print(f"kcodec broker: {args.nodes} node(s), "
                  f"{'data dir ' + args.data_dir if args.data_dir else 'memory storage'}; "
                  f"Ctrl-C stops", file=sys.stderr, flush=True)
            print(cluster.bootstrap, flush=True)
            if metrics_url:
                print(f"kcodec broker: Prometheus metrics on {metrics_url}", file=sys.stderr,
                      flush=True)
            if unclean:
                print(f"kcodec broker: the last stop was not clean (killed?): the logs were "
                      f"recovered; {open_txns} open transaction(s) resumed, each committed or "
                      f"aborted by its producer or aborted at its timeout",
                      file=sys.stderr, flush=True)
            for c in cuts:
                print(f"kcodec broker: {'DATA LOST: ' if c.below_recovery_point else ''}"
                      f"{c.describe()}", file=sys.stderr, flush=True)
            if len(listeners) > 1:
                for name, addr in listeners.items():
                    print(f"  {name}: {addr}", file=sys.stderr, flush=True)
        # set up and serving: its imports, config and recovered state are frozen out of
        # the cyclic GC's walks (kcodec._gc); its full collections had paused every
        # connection for 30-45 ms at a time, the tail of every client's latency
        settle_gc()
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        if exporter is not None:
            exporter.close()
        cluster.stop()
        for sig, handler in old.items():
            signal.signal(sig, handler)
        if not args.json:
            print("kcodec broker: stopped", file=sys.stderr, flush=True)
    return 0


def _client_metrics(specs: list[str]) -> list:
    from kcodec.broker.telemetry import parse_subscription

    try:
        return [parse_subscription(s) for s in specs]
    except ValueError as exc:
        raise UsageError(f"--client-metrics: {exc}") from None


def _racks(text: str | None, nodes: int) -> list[str | None] | None:
    """``--racks a,b,c``: one rack per node."""
    if text is None:
        return None
    racks: list[str | None] = [r.strip() for r in text.split(",")]
    if len(racks) != nodes or not all(racks):
        raise UsageError(f"--racks {text!r}: give {nodes} non-empty rack name(s), one per "
                         f"node, comma-separated")
    return racks
