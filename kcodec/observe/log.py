"""Logging: Python's ``logging``, one logger per module under ``kcodec.*``, and debug
contexts that choose which protocol traffic DEBUG shows (librdkafka's ``debug=``).

Levels::

    INFO     what an operator wants by default: connections made and lost, rebalances
             (generation, what was assigned and revoked, how long), fencing, a producer id
             taken or reset, retries that succeeded late
    WARNING  something lost or given up: a batch expired, a membership lost, a broker
             unreachable for long
    DEBUG    traffic, by context (below); off unless asked for

Contexts (the ``debug`` setting of a client, or ``KCODEC_DEBUG`` in the environment for
every client, broker and runtime in the process: a comma list, ``all`` for every one)::

    broker     connections: connect, handshake, close, reauthentication
    protocol   every request and response: API, version, correlation id, sizes, latency
    metadata   metadata refreshes and what they changed
    topic      partition counts and leaders of each topic
    fetch      each Fetch: node, partitions, bytes, records lag
    consumer   group membership: join, sync, heartbeat, commit, assignment
    producer   batches sealed, sent, retried, acknowledged; the producer id
    msg        per-batch record counts and sizes on both sides
    security   SASL and TLS steps (never a secret: see below)
    telemetry  KIP-714 subscriptions and pushes

Naming contexts turns DEBUG on for the ``kcodec`` logger and, when nothing handles its
records (no handler on it or on the root logger), adds one that writes to stderr, as
librdkafka prints its debug lines; without ``debug``, a logger set to DEBUG by the
application shows every context. Otherwise kcodec's loggers say nothing until the
application configures logging (``kcodec`` has a ``NullHandler``, as a library should).

Secrets never appear, at any level: request bodies are described by their fields with
every bytes field reduced to its length (SASL auth bytes, SCRAM proofs, OAuth tokens
travel in those), configurations are shown by their ``repr`` (which leaves secret fields
out), and :func:`redact` scrubs ``password=``, ``token=`` style text from messages that
quote a peer. Every DEBUG line is behind an ``if``: with DEBUG off nothing is formatted.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from typing import Any

__all__ = ["CONTEXTS", "Debug", "debug_contexts", "describe", "redact", "enable_debug",
           "get_logger"]

CONTEXTS = ("broker", "protocol", "metadata", "topic", "fetch", "consumer", "producer",
            "msg", "security", "telemetry")
# librdkafka's names for the same contexts, so a confluent-kafka setting keeps working
_ALIASES = {"cgrp": "consumer", "generic": "broker", "eos": "producer", "queue": "msg",
            "feature": "broker", "conf": "broker", "admin": "protocol",
            "assignor": "consumer", "interceptor": "msg", "plugin": "broker",
            "mock": "broker"}


# A library's loggers stay silent until the application configures logging (the logging
# HOWTO's advice): without this, Python's last-resort handler would print kcodec's
# warnings on stderr next to the errors the calls themselves raise.
logging.getLogger("kcodec").addHandler(logging.NullHandler())


def get_logger(name: str) -> logging.Logger:
    """The module's logger (``kcodec.<module path>``)."""
    return logging.getLogger(name)


def debug_contexts(setting: str | None) -> frozenset[str]:
    """The contexts named by ``setting`` and ``KCODEC_DEBUG`` together; ``ValueError``
    naming an unknown one and listing the known."""
    words: list[str] = []
    env = os.environ.get("KCODEC_DEBUG")
    # the same variable asks setup.py for a debug build (KCODEC_DEBUG=1): a yes/no value
    # means every context / none, so such a shell never makes a client refuse to start
    flag = (env or "").strip().lower()
    if flag in ("1", "true", "yes", "on"):
        env = "all"
    elif flag in ("0", "false", "no", "off"):
        env = None
    for text in (setting, env):
        if text:
            words += [w.strip().lower() for w in text.split(",") if w.strip()]
    out: set[str] = set()
    for w in words:
        if w == "all":
            out.update(CONTEXTS)
            continue
        w = _ALIASES.get(w, w)
        if w not in CONTEXTS:
            raise ValueError(f"debug: unknown context {w!r} (known: all, {', '.join(CONTEXTS)})")
        out.add(w)
    return frozenset(out)


class Debug:
    """Which contexts log at DEBUG, as attributes (``dbg.protocol``), each True only when
    the context is chosen (or no context was named) and the logger is at DEBUG -- read
    once per request, so a hot path pays one attribute lookup when off."""

    __slots__ = CONTEXTS + ("named",)
    broker: bool
    protocol: bool
    metadata: bool
    topic: bool
    fetch: bool
    consumer: bool
    producer: bool
    msg: bool
    security: bool
    telemetry: bool
    named: frozenset[str]

    def __init__(self, setting: str | None = None) -> None:
        chosen = debug_contexts(setting)
        self.named = chosen
        if chosen:
            enable_debug()
        on = logging.getLogger("kcodec").isEnabledFor(logging.DEBUG)
        for c in CONTEXTS:
            setattr(self, c, on and (not chosen or c in chosen))

    def __repr__(self) -> str:
        return f"Debug({','.join(c for c in CONTEXTS if getattr(self, c)) or 'off'})"


_handler: logging.Handler | None = None


def enable_debug() -> None:
    """DEBUG on for ``kcodec``, with a stderr handler when nothing would show its records."""
    global _handler
    root = logging.getLogger()
    lg = logging.getLogger("kcodec")
    if lg.getEffectiveLevel() > logging.DEBUG:
        lg.setLevel(logging.DEBUG)
    real = [h for h in lg.handlers if not isinstance(h, logging.NullHandler)]
    if _handler is None and not real and not root.handlers:
        _handler = logging.StreamHandler(sys.stderr)
        _handler.setFormatter(logging.Formatter(
            "%(asctime)s %(levelname)s %(name)s: %(message)s"))
        lg.addHandler(_handler)


_SECRET = re.compile(
    r"(?i)\b(password|passwd|secret|token|sasl[_.]?password|ssl[_.]?password|"
    r"credential|proof)(\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;)}]+)")
_SCRAM = re.compile(r"\b([cpr])=[A-Za-z0-9+/=_-]{8,}")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}")


def redact(text: str) -> str:
    """``text`` with secrets replaced by ``***``: ``password=...`` and friends, SCRAM
    attributes (``c=``, ``r=``, ``p=``), bearer tokens."""
    text = _SECRET.sub(lambda m: f"{m.group(1)}{m.group(2)}***", text)
    text = _SCRAM.sub(lambda m: f"{m.group(1)}=***", text)
    return _BEARER.sub(lambda m: f"{m.group(1)}***", text)


def describe(body: Any, depth: int = 0, limit: int = 8) -> str:
    """A one-line view of a protocol body for DEBUG: scalar fields as they are, bytes as
    their length only, lists as their first ``limit`` items. Never a byte of a bytes field:
    credentials and record data travel in those."""
    if body is None:
        return "null"
    if isinstance(body, (bytes, bytearray, memoryview)):
        return f"<{len(body)} bytes>"
    if isinstance(body, (int, float, bool)):
        return repr(body)
    if isinstance(body, str):
        return repr(body if len(body) <= 64 else body[:61] + "...")
    if isinstance(body, (list, tuple)):
        if depth > 3:
            return f"[{len(body)} items]"
        items = [describe(x, depth + 1, limit) for x in body[:limit]]
        more = f", ... {len(body) - limit} more" if len(body) > limit else ""
        return "[" + ", ".join(items) + more + "]"
    fields = getattr(body, "__slots__", None) or getattr(body, "FIELDS", None)
    names = _field_names(body, fields)
    if names is None:
        return f"<{type(body).__name__}>"
    if depth > 3:
        return f"{type(body).__name__}(...)"
    parts = []
    for n in names:
        v = getattr(body, n, None)
        if n == "unknown_tagged_fields" and not v:
            continue
        parts.append(f"{n}={describe(v, depth + 1, limit)}")
    return f"{type(body).__name__}(" + ", ".join(parts) + ")"


def _field_names(body: Any, fields: Any) -> list[str] | None:
    if isinstance(fields, (list, tuple)) and fields:
        names = [f if isinstance(f, str) else getattr(f, "name", None) for f in fields]
        if all(isinstance(n, str) for n in names):
            return [str(n) for n in names if not str(n).startswith("_")]
    d = getattr(body, "__dict__", None)
    if isinstance(d, dict):
        return [k for k in d if not k.startswith("_")]
    return None
