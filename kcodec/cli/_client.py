"""Shared pieces of the client sub-commands: connection options, tables, JSON lines, errors."""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import signal
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

USAGE = 2   # exit code for bad arguments (as argparse uses)


class UsageError(Exception):
    """A bad argument found after parsing: one line on stderr, exit code 2."""


class Once(argparse.Action):
    """An option that may be given once: a second value is a usage error, not a silent
    replacement of the first."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{'/'.join(self.option_strings)} may be given only once")
        setattr(namespace, self.dest, values)


def required(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """The group --help lists required options under."""
    return parser.add_argument_group("required")


FULL_HELP = False   # --help-all: describe each TLS and SASL option (kcodec.cli.main sets it)


def add_connection(parser: argparse.ArgumentParser, json_flag: bool = True) -> None:
    from kcodec.client.config import DEFAULT_BOOTSTRAP

    g = parser.add_argument_group("connection")
    g.add_argument("--bootstrap", "-b", metavar="HOST:PORT[,...]",
                   default=os.environ.get("KCODEC_BOOTSTRAP", DEFAULT_BOOTSTRAP),
                   help="bootstrap brokers (default: $KCODEC_BOOTSTRAP or %(default)s)")
    g.add_argument("--client-id", default="kcodec-cli", help="client id sent to the broker")
    g.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                   help="how long to wait for the broker: each request with its retries, "
                        "each record's delivery (produce), a broker that stopped answering "
                        "(consume); an address that refuses fails at once (default 30)")
    from kcodec.cli._security import add_security

    add_security(parser)
    if json_flag:
        parser.add_argument("--json", action="store_true", help="JSON lines instead of a table")


def add_settings(parser: argparse.ArgumentParser, kind: str) -> None:
    """``-X NAME=VALUE`` (kcat's), also spelt as Kafka's scripts spell it
    (``--producer-property``, ``--consumer-property``): any client setting."""
    parser.add_argument("-X", f"--{kind}-property", dest="settings", action="append", default=[],
                        metavar="NAME=VALUE",
                        help=f"a {kind} setting, by kcodec's name (batch_size), Java's "
                             "(batch.size) or librdkafka's (queue.buffering.max.ms); it "
                             "wins over the command's own choices; repeatable")


def apply_settings(cfg: dict[str, Any], specs: list[str], config_class: Any) -> dict[str, Any]:
    """``cfg`` with the ``-X`` settings on top (a setting the command chose is replaced by
    the user's), checked by ``config_class``: an unknown name or a bad value is a usage
    error naming it."""
    from kcodec.client.config_names import ALIASES, normalize

    def canonical(name: str) -> str:
        n = normalize(name)
        return ALIASES.get(n, n)

    out = dict(cfg)
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"-X takes NAME=VALUE, got {spec!r}")
        want = canonical(name)
        for k in [k for k in out if canonical(k) == want]:
            del out[k]
        out[name.strip()] = value
    if specs:
        try:
            config_class.from_kwargs(out)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"-X: {exc}") from None
    return out


def client_config(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    if args.timeout <= 0:
        raise UsageError(f"--timeout must be positive, got {args.timeout}")
    ms = int(args.timeout * 1000)
    from kcodec.client.config import parse_bootstrap

    parse_bootstrap(args.bootstrap)   # a malformed address is a usage error (exit 2)
    from kcodec.cli._security import security_config

    return {"bootstrap_servers": args.bootstrap, "client_id": args.client_id,
            "api_timeout_ms": ms, "request_timeout_ms": ms,
            "socket_connection_setup_timeout_ms": min(ms, 10000), **security_config(args),
            **extra}


def guarded(run):
    """Wrap ``run(args)``: UsageError and bad config values -> one line, exit code 2."""
    def wrapper(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except (UsageError, ValueError) as exc:
            from kcodec.errors import KcodecError
            if isinstance(exc, KcodecError):
                raise
            print(f"kcodec {args.command}: error: {exc}", file=sys.stderr)
            return USAGE
    wrapper.__doc__ = run.__doc__
    return wrapper


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], out=None) -> None:
    rows = [["" if c is None else str(c) for c in r] for r in rows]
    out = out or sys.stdout
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    print("  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=False)).rstrip(), file=out)
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip(), file=out)


def json_line(obj: Any, out=None, flush: bool = True) -> None:
    print(json.dumps(obj, separators=(",", ":")), file=out or sys.stdout, flush=flush)


def text(b: bytes | None, b64: bool = False) -> Any:
    """bytes for JSON: a str when UTF-8, else {"base64": ...}; with ``b64`` always a base64
    str; None stays None."""
    if b is None:
        return None
    if b64:
        return base64.b64encode(b).decode()
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(b).decode()}


_ESCAPES = {i: f"\\x{i:02x}" for i in [*range(0x20), 0x7F]}
_ESCAPES.update({0x5C: "\\\\", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"})
_RAW = re.compile("[\udc80-\udcff]")


def show(b: bytes | None) -> str:
    """bytes for people, one line: UTF-8, with newlines, tabs, NULs and other control
    characters, backslashes and bytes that are not UTF-8 escaped (``\\n``, ``\\x00``,
    ``\\\\``, ``\\xff``); None as 'null'."""
    if b is None:
        return "null"
    s = b.decode("utf-8", "surrogateescape").translate(_ESCAPES)
    return _RAW.sub(_raw_byte, s)


def _raw_byte(m: re.Match) -> str:
    return f"\\x{ord(m.group()) - 0xDC00:02x}"


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` when one of ``known`` is close to ``name``, else ``""``."""
    import difflib

    close = difflib.get_close_matches(name, [k for k in known if k != name], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def no_such_topics(missing: Sequence[str], known: Iterable[str]) -> str:
    """The error for topics the cluster does not have, with near names and what to do."""
    known = list(known)
    what = "; ".join(f"topic {t!r} does not exist{did_you_mean(t, known)}" for t in missing)
    return f"{what}: 'kcodec topics list' shows the topics, 'kcodec topics create NAME' makes one"


def require_topics(admin: Any, topics: list[str]) -> Any:
    """The cluster metadata of ``topics``; an error naming every one that does not exist
    (with a near name where there is one) instead of the broker's error code."""
    from kcodec.client import KafkaError
    from kcodec.errors import KcodecError
    from kcodec.protocol import ErrorCode

    try:
        return admin.describe_cluster(topics)
    except KafkaError as exc:
        if exc.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise
    known = [t.name for t in admin.describe_cluster().topics]
    missing = [t for t in topics if t not in known]
    if not missing:                  # created in the meantime
        return admin.describe_cluster(topics)
    raise KcodecError(no_such_topics(missing, known))


def which_one(command: str, choices: dict[str, str], options_each: bool = True) -> int:
    """A command of several sub-commands given none: list them (stderr), exit code 2."""
    width = max(map(len, choices))
    lines = [f"kcodec {command}: give one of these:"]
    lines += [f"  kcodec {command} {name.ljust(width)}  {what}" for name, what in choices.items()]
    lines.append(f"('kcodec {command} NAME --help' lists the options of each)" if options_each
                 else f"('kcodec {command} --help' lists the options)")
    print("\n".join(lines), file=sys.stderr)
    return USAGE


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived while the command was waiting for input."""


class Graceful:
    """SIGINT/SIGTERM handling for commands that must finish cleanly: the first signal sets
    ``stop`` (the command ends its current line, commits or flushes, and reports); while
    ``interruptible`` (blocked reading input) it raises ``Interrupted`` instead; a second
    signal exits at once. ``exit_code`` is 128 + the signal number."""

    def __init__(self) -> None:
        self.stop = False
        self.signum = 0
        self.interruptible = False
        self._old: dict[int, Any] = {}

    def __enter__(self) -> Graceful:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old[sig] = signal.signal(sig, self._handle)
            except ValueError:   # not the main thread: leave the defaults
                pass
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.stop:   # the second one: give up at once
            raise KeyboardInterrupt
        self.stop = True
        self.signum = signum
        if self.interruptible:
            raise Interrupted

    @property
    def exit_code(self) -> int:
        return 128 + self.signum if self.signum else 0


class Ticker:
    """A progress line on stderr, redrawn at most twice a second, when stderr is a terminal
    and stdout is not, or stdout gets nothing (``quiet_stdout``: rows on the same terminal
    would scribble over it); quiet when stderr is piped. ``fmt`` may use ``{secs}`` and
    ``{rate}`` (of the ``n`` value, per second) and ``{eta}`` (from ``done``/``total``,
    "" when the total is not known) besides the values given to ``update``."""

    def __init__(self, fmt: str, enabled: bool | None = None, quiet_stdout: bool = False) -> None:
        if enabled is None:
            try:
                enabled = sys.stderr.isatty() and (quiet_stdout or not sys.stdout.isatty())
            except (AttributeError, ValueError):
                enabled = False
        self.enabled = enabled
        self.fmt = fmt
        self.start = time.monotonic()
        self._last = 0.0
        self.drawn = False

    def update(self, **values: Any) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.5:
            return
        self._last = now
        secs = max(now - self.start, 1e-9)
        done, total = values.pop("done", None), values.pop("total", None)
        eta = ""
        if done and total and total > done:
            eta = f", {(total - done) * secs / done:.0f} s left ({100 * done / total:.0f} %)"
        rate = f"{values.get('n', 0) / secs:,.0f}"
        sys.stderr.write("\r" + self.fmt.format(secs=secs, rate=rate, eta=eta, **values)
                         + "\x1b[K")
        sys.stderr.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self.drawn = False


class BrokerWatch:
    """Says on stderr, within about a second, that the brokers stopped answering a running
    client (a refused connection, a lost one, requests failing) and that it keeps retrying
    for at most ``timeout`` seconds (``--timeout``), then that they answer again: without
    it a broker killed under ``produce`` or ``consume`` went unmentioned until the timeout.
    Only a broker that had answered before counts: one never reached is the client's own
    error at once. A daemon thread reads the client's connection times, no more."""

    GRACE = 1.0    # seconds without an answer after a failure before it is said

    def __init__(self, client: Any, command: str, timeout: float) -> None:
        import threading

        from kcodec.client.metrics import cluster_of

        try:
            self.cluster: Any = cluster_of(client)
        except TypeError:            # not a client with connections of its own: no watch
            self.cluster = None
        self.command, self.timeout = command, timeout
        self.down_since: float | None = None     # when the outage was said (None: not down)
        self.outages = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"kcodec-{command}-watch",
                                        daemon=True)

    def start(self) -> BrokerWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(1)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.check(time.monotonic())

    def check(self, now: float) -> None:
        c = self.cluster
        if c is None or c.closed or not c.reached or not c.last_ok:
            return
        failing = c.last_fail > c.last_ok and now - c.last_ok >= self.GRACE
        if failing and self.down_since is None:
            self.down_since = now
            self.outages += 1
            err = c.last_error
            why = f": {err}" if err is not None else ""
            self._say(f"no answer from the broker for {now - c.last_ok:.1f} s, after it had "
                      f"answered{why}; retrying for up to {self.timeout:g} s (--timeout), "
                      "Ctrl-C stops")
        elif self.down_since is not None and c.last_ok > c.last_fail:
            self._say(f"the broker answers again, after {now - self.down_since:.1f} s")
            self.down_since = None

    def _say(self, msg: str) -> None:
        try:
            sys.stderr.write(f"\r\x1b[Kkcodec {self.command}: {msg}\n" if _tty(sys.stderr)
                             else f"kcodec {self.command}: {msg}\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass


def _tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
