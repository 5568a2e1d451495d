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
from typing import Any

from kcodec.cli._client import UsageError, guarded

NAME = "run"
HELP = "run a handler over topics: supervised pullers and sinkers, a store between them"

EXAMPLES = [
    "kcodec run -t events -g handlers myapp.handlers:handle",
    "kcodec run -c run.toml myapp.handlers:handle",
]
# flag -> (type, help); the flag's name is the setting's (dashes for underscores); each
# store's own flags come from its settings dataclass (kcodec.runtime.storage.StoreKind)
_OPTIONS = [
    ("pullers", int, "processes that fetch (group members)"),
    ("sinkers", int, "processes that run the handler (not in direct mode)"),
    ("storage", str, "where records wait between pulling and handling: direct (none: the "
                     "puller runs the handler), or a store"),
    ("state-dir", str, "the runtime's directory: file store, failed queue, control socket"),
    ("batch-size", int, "records per handler call and per store write"),
    ("linger-ms", int, "wait at most this long to fill a batch"),
    ("max-pending", int, "pause fetching past this many waiting records"),
    ("retries", int, "deliveries after the first before a record fails for good"),
    ("backoff-ms", int, "delay before the first retry, doubled each time"),
    ("backoff-max-ms", int, "longest delay between retries"),
    ("dead-letter-topic", str, "also write records that fail for good to this topic"),
    ("handle", str, "batch | record: the handler takes a list of records and returns one "
                    "True/False each, or takes one record and returns nothing "
                    "(raising fails that record alone)"),
    ("handler-timeout", float, "seconds one handler call may take"),
    ("decode", str, "raw | utf8 | json: what the handler gets as a value; a "
                    "value that does not decode fails for good"),
    ("max-rss-mb", int, "restart a process after its batch once its RSS passes this (0: no limit)"),
    ("grace", float, "seconds to stop cleanly after SIGINT/SIGTERM"),
    ("lease-ms", int, "a sinker's claim lasts this long unless renewed"),
    ("control-socket", str, "path of the control socket (default <state-dir>/control.sock)"),
    ("auto-offset-reset", str, "earliest | latest | none: where a new group starts"),
    ("log-level", str, "DEBUG, INFO, WARNING, ERROR"),
    ("assign", str, "TOPIC:P[,TOPIC:P...] (or P for every topic): read these partitions "
                    "without group membership, dealt out among the pullers; the group only "
                    "keeps the committed offsets"),
    ("group-session-timeout-ms", int, "consumer protocol: set the group's config "
                                      "consumer.session.timeout.ms at start (the broker "
                                      "bounds it: Kafka's 45000-60000); the classic "
                                      "protocol's is -X session_timeout_ms"),
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
    from kcodec.runtime.storage import store_settings_fields, stores

    g = parser.add_argument_group("runtime")
    for flag, kind, text in _OPTIONS:
        g.add_argument(f"--{flag}", type=kind, default=None, help=text + _default(flag))
    for k in stores().values():       # each store's settings under its name
        sg = parser.add_argument_group(f"--storage {k.name}", k.help)
        for f in store_settings_fields(k):
            sg.add_argument(f"--{f.name.replace('_', '-')}", type=_arg_type(f), default=None,
                            help=f.metadata.get("help", "") + _shown(f.default))
    parser.add_argument("--print-config", action="store_true",
                        help="print the settings in effect as JSON and exit")


def _default(flag: str) -> str:
    """`` (default X)`` from ``Settings`` (the one place defaults live), or nothing."""
    import dataclasses

    from kcodec.runtime.config import Settings
    from kcodec.runtime.storage import store_names

    name = flag.replace("-", "_")
    f = next((f for f in dataclasses.fields(Settings) if f.name == name), None)
    default = dataclasses.MISSING if f is None else f.default
    return _shown(default, "choices: " + ", ".join(store_names()) if name == "storage" else "")


def _shown(default: Any, extra: str = "") -> str:
    """`` (default X; EXTRA)``; no default for a missing, None, empty or zero one."""
    import dataclasses

    if default is dataclasses.MISSING or default in (None, "", 0) and \
            not isinstance(default, float):
        return f" ({extra})" if extra else ""
    shown = f"{default:g}" if isinstance(default, float) else str(default)
    return f" (default {shown}{'; ' + extra if extra else ''})"


def _arg_type(f: Any) -> Any:
    """The argparse type of a store setting by its annotation: int, float, a bool from
    true/false (1/0, yes/no, on/off), else str."""
    t = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "str")
    base = t.replace(" ", "").split("|")[0]
    if base == "bool":
        def flag(raw: str) -> bool:
            low = raw.strip().lower()
            if low not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
                raise argparse.ArgumentTypeError(f"expected true or false, got {raw!r}")
            return low in ("1", "true", "yes", "on")
        return flag
    return {"int": int, "float": float}.get(base, str)


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
    from kcodec.runtime.storage import setting_owners

    overrides = {f.replace("-", "_"): getattr(args, f.replace("-", "_"))
                 for f, _k, _h in _OPTIONS}
    overrides.update({name: getattr(args, name, None) for name in setting_owners()})
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
    _preflight(s)
    setup_logging(s.log_level, "master", s.secrets())
    try:
        return Master(s, ref).run()
    except (RuntimeError, ConnectionError) as exc:
        print(f"kcodec run: error: {exc}", file=sys.stderr)
        return 1


def _preflight(s: Any) -> None:
    """Before any process starts: the brokers answer and the topics exist, said once (a
    missing topic with a near name), instead of pullers that wait on no partitions or
    restart with a traceback each time."""
    import dataclasses

    from kcodec.cli._client import require_topics
    from kcodec.client import Admin, AdminConfig

    names = {f.name for f in dataclasses.fields(AdminConfig)}
    cfg = {k: v for k, v in s.client_settings().items() if k in names}
    cfg.setdefault("api_timeout_ms", 10000)
    cfg.setdefault("socket_connection_setup_timeout_ms", 5000)
    with Admin(**cfg) as admin:
        require_topics(admin, sorted(set(s.topics)))
