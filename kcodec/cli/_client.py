"""Shared pieces of the client sub-commands: connection options, tables, JSON lines, errors."""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from kcodec.client.config import DEFAULT_BOOTSTRAP

USAGE = 2   # exit code for bad arguments (as argparse uses)


class UsageError(Exception):
    """A bad argument found after parsing: one line on stderr, exit code 2."""


def add_connection(parser: argparse.ArgumentParser, json_flag: bool = True) -> None:
    g = parser.add_argument_group("connection")
    g.add_argument("--bootstrap", "-b", metavar="HOST:PORT[,...]",
                   default=os.environ.get("KCODEC_BOOTSTRAP", DEFAULT_BOOTSTRAP),
                   help="bootstrap brokers (default: $KCODEC_BOOTSTRAP or %(default)s)")
    g.add_argument("--client-id", default="kcodec-cli", help="client id sent to the broker")
    g.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                   help="give up on the broker after this long (default 30)")
    if json_flag:
        parser.add_argument("--json", action="store_true", help="JSON lines instead of a table")


def client_config(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    if args.timeout <= 0:
        raise UsageError(f"--timeout must be positive, got {args.timeout}")
    ms = int(args.timeout * 1000)
    return {"bootstrap_servers": args.bootstrap, "client_id": args.client_id,
            "api_timeout_ms": ms, "request_timeout_ms": ms,
            "socket_connection_setup_timeout_ms": min(ms, 10000), **extra}


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
    print("  ".join(h.upper().ljust(w) for h, w in zip(headers, widths)).rstrip(), file=out)
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip(), file=out)


def json_line(obj: Any, out=None) -> None:
    print(json.dumps(obj, separators=(",", ":")), file=out or sys.stdout, flush=True)


def text(b: bytes | None) -> Any:
    """bytes for JSON: a str when UTF-8, else {"base64": ...}; None stays None."""
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(b).decode()}


def show(b: bytes | None) -> str:
    """bytes for people: UTF-8 with escapes for the rest; None as 'null'."""
    if b is None:
        return "null"
    return b.decode("utf-8", "backslashreplace")
