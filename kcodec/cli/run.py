"""``kcodec run``: run a handler over topics with supervised puller and sinker processes.

    kcodec run examples.runtime.hello:handle -t events -g hello
    kcodec run myapp:handle -t orders -g billing --storage redis --sinkers 4 \\
        --dead-letter-topic orders.dlq -X security_protocol=SASL_SSL -X sasl_username=app
    kcodec run myapp:handle --config run.toml        # keys as the flags: pullers = 2 ...

Settings: flags > KCODEC_RUN_<FLAG> variables > the --config file > defaults. Client
settings by their kcodec names with -X NAME=VALUE, KCODEC_RUN_CLIENT_<NAME> or the config
file's [client] table. Stops cleanly on SIGINT/SIGTERM (exit 0), at once on a second one.
"""

from __future__ import annotations

import argparse
import json
import sys

from kcodec.cli._client import UsageError, guarded

NAME = "run"
HELP = "run a handler over topics: supervised pullers and sinkers, a store between them"

EXAMPLES = [
    "kcodec run -t events -g handlers myapp.handlers:handle",
    "kcodec run -c run.toml myapp.handlers:handle",
]
# flag -> (type, help); the flag's name is the setting's (dashes for underscores)
_OPTIONS = [
    ("pullers", int, "processes that fetch (group members; default 1)"),
    ("sinkers", int, "processes that run the handler (file, redis; default 1)"),
    ("storage", str, "direct | file | redis: where records wait between pulling and "
                     "handling (default file)"),
    ("state-dir", str, "the runtime's directory: file store, failed queue, control socket "
                       "(default ./kcodec-run)"),
    ("redis-url", str, "redis://host:port/db of the redis store"),
    ("redis-prefix", str, "key prefix in Redis (default kcodec:<group>)"),
    ("redis-durability", str, "require | warn: refuse (default) or only warn about a Redis "
                              "whose restart can lose messages (no appendonly)"),
    ("batch-size", int, "records per handler call and per store write (default 500)"),
    ("linger-ms", int, "wait at most this long to fill a batch (default 100)"),
    ("max-pending", int, "pause fetching past this many waiting records (default 100000)"),
    ("retries", int, "deliveries after the first before a record fails for good (default 3)"),
    ("backoff-ms", int, "delay before the first retry, doubled each time (default 1000)"),
    ("backoff-max-ms", int, "longest delay between retries (default 60000)"),
    ("dead-letter-topic", str, "also write records that fail for good to this topic"),
    ("handle", str, "batch | record: the handler takes a list of records and returns one "
                    "True/False each (default), or takes one record and returns nothing "
                    "(raising fails that record alone)"),
    ("handler-timeout", float, "seconds one handler call may take (default 60)"),
    ("decode", str, "raw | utf8 | json: what the handler gets as a value (default raw); a "
                    "value that does not decode fails for good"),
    ("max-rss-mb", int, "restart a process after its batch once its RSS passes this (0: no limit)"),
    ("grace", float, "seconds to stop cleanly after SIGINT/SIGTERM (default 30)"),
    ("fsync", str, "always | interval | never: the file store's fsync policy (default always)"),
    ("fsync-interval-ms", int, "with --fsync interval: sync at least this often (default 1000)"),
    ("lease-ms", int, "a sinker's claim lasts this long unless renewed (default 30000)"),
    ("control-socket", str, "path of the control socket (default <state-dir>/control.sock)"),
    ("auto-offset-reset", str, "earliest | latest | none: where a new group starts "
                               "(default earliest)"),
    ("log-level", str, "DEBUG, INFO (default), WARNING, ERROR"),
    ("assign", str, "TOPIC:P[,TOPIC:P...] (or P for every topic): read these partitions "
                    "without group membership, dealt out among the pullers; the group only "
                    "keeps the committed offsets"),
    ("health-port", int, "serve /health and /ready (JSON; 503 when not) on "
                         "http://127.0.0.1:P for liveness and readiness probes"),
    ("metrics-port", int, "serve every process's metrics for Prometheus on "
                          "http://127.0.0.1:P/metrics (needs pip install 'kcodec[prometheus]')"),
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("handler", metavar="MODULE:FUNCTION",
                        help="the handler: takes a list of records, returns one True/False each")
    parser.add_argument("-t", "--topic", dest="topics", action="append", metavar="TOPIC",
                        help="topic to consume (repeat, or comma-separated)")
    parser.add_argument("-g", "--group", help="consumer group id")
    parser.add_argument("-b", "--bootstrap", metavar="HOST:PORT[,...]",
                        help="bootstrap brokers (default $KCODEC_BOOTSTRAP or 127.0.0.1:9092)")
    parser.add_argument("-c", "--config", metavar="FILE",
                        help="TOML file of settings (keys as the flags; [client] table)")
    parser.add_argument("-X", "--client", dest="client_kv", action="append", default=[],
                        metavar="NAME=VALUE",
                        help="a client setting by its kcodec name (security_protocol, "
                             "sasl_username, session_timeout_ms ...); repeat")
    g = parser.add_argument_group("runtime")
    for flag, kind, text in _OPTIONS:
        g.add_argument(f"--{flag}", type=kind, default=None, help=text)
    parser.add_argument("--print-config", action="store_true",
                        help="print the settings in effect as JSON and exit")


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.runtime.config import Settings, client_value

    client = {}
    for kv in args.client_kv:
        name, sep, value = kv.partition("=")
        if not sep or not name:
            raise UsageError(f"-X takes NAME=VALUE, got {kv!r}")
        name = name.strip().replace(".", "_").replace("-", "_")
        client[name] = client_value(name, value, f"-X {name}")
    overrides = {f.replace("-", "_"): getattr(args, f.replace("-", "_"))
                 for f, _k, _h in _OPTIONS}
    if args.topics:
        overrides["topics"] = [t for item in args.topics for t in item.split(",") if t]
    overrides["group"] = args.group
    overrides["bootstrap"] = args.bootstrap
    overrides["client"] = client
    s = Settings.build(file=args.config, overrides=overrides)
    s.ready()
    if args.print_config:
        print(json.dumps(s.shown(), indent=2, default=str))
        return 0
    from kcodec.runtime.child import setup_logging
    from kcodec.runtime.handler import handler_ref
    from kcodec.runtime.master import Master

    ref = handler_ref(args.handler)   # fails here, once, if it cannot be imported
    setup_logging(s.log_level, "master", s.secrets())
    try:
        return Master(s, ref).run()
    except (RuntimeError, ConnectionError) as exc:
        print(f"kcodec run: error: {exc}", file=sys.stderr)
        return 1
