"""``kcodec produce``: send messages (arguments, or lines of stdin) to a topic.

Prints one line per confirmed record (in input order) and a summary on stderr. Each record
must be confirmed within ``--timeout`` (the producer's ``delivery_timeout_ms``); a failure
names its cause. SIGINT or SIGTERM stops reading, waits (at most ``--timeout``) for what
was sent, prints those confirmations, then says on stderr how many lines were confirmed,
how many were sent but not confirmed (they may or may not be in the topic) and how many
were never sent, and where to resume; exit code 130 (SIGINT) or 143 (SIGTERM).
"""

from __future__ import annotations

import argparse
import queue
import sys
import threading
import time
from typing import Any

from kcodec.cli._client import (
    Graceful,
    Interrupted,
    Once,
    Ticker,
    UsageError,
    add_connection,
    client_config,
    guarded,
    json_line,
    required,
)
from kcodec.client.config import COMPRESSION_TYPES

NAME = "produce"
HELP = "send messages to a topic (arguments, or one per line of stdin)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    required(parser).add_argument("-t", "--topic", action=Once, required=True,
                                  help="topic to write to")
    parser.add_argument("-p", "--partition", type=int,
                        help="partition (default: by key; keyless records: sticky, KIP-794)")
    parser.add_argument("-k", "--key", help="key of every message")
    parser.add_argument("-c", "--compression", default="none",
                        help=f"compression codec: {', '.join(COMPRESSION_TYPES)} (default none)")
    parser.add_argument("-H", "--header", action="append", default=[], metavar="KEY=VALUE",
                        help="a header on every message (repeatable)")
    parser.add_argument("--acks", default="all", help="0, 1 or all (default all)")
    parser.add_argument("messages", nargs="*", metavar="MESSAGE",
                        help="messages to send; none: read lines from stdin")
    add_connection(parser)


@guarded
def run(args: argparse.Namespace) -> int:
    if args.compression not in COMPRESSION_TYPES:
        raise UsageError(f"unknown compression codec {args.compression!r} "
                         f"(choose from {', '.join(COMPRESSION_TYPES)})")
    if args.partition is not None and args.partition < 0:
        raise UsageError(f"partition must be non-negative, got {args.partition}")
    if args.partition is not None and args.key is not None:
        raise UsageError("give either -p PARTITION or -k KEY, not both")
    headers = []
    for h in args.header:
        k, sep, v = h.partition("=")
        if not sep or not k:
            raise UsageError(f"header {h!r} is not KEY=VALUE")
        headers.append((k, v.encode()))
    acks = args.acks
    ms = int(args.timeout * 1000)
    cfg = client_config(args, compression_type=args.compression, acks=acks,
                        enable_idempotence=acks in ("all", "-1"), linger_ms=5,
                        delivery_timeout_ms=ms)
    with Graceful() as sig:
        return _produce(args, cfg, headers, sig)


class _Tally:
    def __init__(self) -> None:
        self.read = self.sent = self.confirmed = self.failed = 0
        self.first_failed = 0        # line number of the first record that failed (0: none)
        self.eof = False             # the input ended (as opposed to: reading stopped)
        self.error: BaseException | None = None

    def first_unconfirmed(self) -> int:
        """Line number of the first line sent but not confirmed (0: none). Confirmations
        are handled in input order, so it is the failed one or the next one to handle."""
        pending = self.sent - self.confirmed - self.failed
        nxt = self.confirmed + self.failed + 1 if pending else 0
        return min([x for x in (self.first_failed, nxt) if x], default=0)


class _Reporter(threading.Thread):
    """Prints confirmations in input order as they come (not only when the next input line
    arrives), flushing stdout whenever it has nothing more to print."""

    def __init__(self, args: argparse.Namespace, n: _Tally) -> None:
        super().__init__(name="kcodec-produce-report", daemon=True)
        self.args, self.n = args, n
        self.queue: queue.Queue = queue.Queue()
        self.give_up = threading.Event()

    def run(self) -> None:
        out = sys.stdout
        while True:
            try:
                fut = self.queue.get_nowait()
            except queue.Empty:
                out.flush()
                fut = self.queue.get()
            if fut is None:
                break
            while not fut.done():
                if self.give_up.is_set():
                    out.flush()
                    return
                fut.exception(0.1)
            _report(self.args, fut, self.n)
        out.flush()


def _produce(args: argparse.Namespace, cfg: dict[str, Any], headers: list, sig: Graceful) -> int:
    from kcodec.client import Producer
    from kcodec.errors import KcodecError

    key = args.key.encode() if args.key is not None else None
    n = _Tally()
    ticker = Ticker("sent {sent} records, {confirmed} confirmed, {secs:.0f} s")
    t0 = time.monotonic()
    producer = Producer(**cfg)
    reporter = _Reporter(args, n)
    reporter.start()
    try:
        source = iter(args.messages) if args.messages else _lines(sys.stdin)
        while not sig.stop and n.error is None:
            sig.interruptible = True     # blocked on input: a signal may stop the read
            try:
                msg = next(source, None)
            except Interrupted:
                break
            finally:
                sig.interruptible = False
            if msg is None:
                n.eof = True
                break
            n.read += 1
            try:
                fut = producer.send(args.topic, msg.encode(), key=key,
                                    partition=args.partition, headers=headers or None)
            except KcodecError as exc:   # e.g. the buffer stayed full for --timeout
                n.read -= 1              # not sent: the resume line is this one
                n.error = n.error or exc
                break
            reporter.queue.put(fut)
            n.sent += 1
            ticker.update(sent=n.sent, confirmed=n.confirmed)
        # what was sent: wait for its confirmations, at most --timeout from here (their
        # own delivery timeouts, named, come first), keeping the progress line current
        reporter.queue.put(None)
        deadline = time.monotonic() + args.timeout + 1
        # after a failure the others are not waited for: the report's resume line is the
        # first line not confirmed, whatever becomes of the lines after it
        while reporter.is_alive() and time.monotonic() < deadline and n.error is None:
            reporter.join(0.25)
            ticker.update(sent=n.sent, confirmed=n.confirmed)
    finally:
        reporter.give_up.set()
        reporter.queue.put(None)
        reporter.join(5)
        ticker.close()
        producer.close(0)            # what is still unconfirmed stays unconfirmed
    unconfirmed = n.sent - n.confirmed - n.failed
    never = (len(args.messages) - n.read) if args.messages else None
    secs = time.monotonic() - t0
    if sig.stop or n.error is not None or unconfirmed:
        what = "interrupted" if sig.stop else "stopped"
        print(f"kcodec produce: {what}: {n.confirmed} lines confirmed, {unconfirmed} sent but "
              f"unconfirmed (they may or may not be in {args.topic!r}), {n.failed} failed, "
              f"{_rest(args, n, never)}", file=sys.stderr)
        if n.error is not None:
            print(f"kcodec produce: error: {n.error}", file=sys.stderr)
            return 1
        if unconfirmed and not sig.stop:
            print(f"kcodec produce: error: {unconfirmed} records not confirmed within "
                  f"{args.timeout:g} s (--timeout)", file=sys.stderr)
            return 1
        return sig.exit_code
    rate = f" ({n.confirmed / secs:,.0f} records/s)" if secs > 0 and n.confirmed >= 1000 else ""
    print(f"kcodec produce: {n.confirmed} records confirmed in {args.topic!r} in {secs:.2f} s"
          f"{rate}", file=sys.stderr)
    return 0


def _rest(args: argparse.Namespace, n: _Tally, never: int | None) -> str:
    """What became of the rest of the input, and the line to resume from: the first line
    not confirmed (every line before it is in the topic)."""
    bad = n.first_unconfirmed()
    if never is not None:
        rest = f"{never} never sent"
        resume = bad or (n.read + 1 if never else 0)
    else:
        rest = f"input ended after line {n.read}" if n.eof else \
            f"input after line {n.read} never read"
        resume = bad or (0 if n.eof else n.read + 1)
    if not resume:
        return rest
    what = "line" if never is None else "message"
    rest += f" (resume from {what} {resume})"
    again = n.confirmed - (resume - 1)
    if again > 0:
        rest += f"; {again} confirmed lines after it would be sent again"
    return rest


def _lines(stream: Any):
    for line in stream:
        yield line[:-1] if line.endswith("\n") else line


def _report(args: argparse.Namespace, fut: Any, n: _Tally) -> None:
    from kcodec.errors import KcodecError

    try:
        r = fut.result(0)
    except KcodecError as exc:
        n.failed += 1
        if not n.first_failed:
            n.first_failed = n.confirmed + n.failed   # its line: futures come in input order
        if n.error is None:
            n.error = exc
        return
    if args.json:
        json_line({"topic": args.topic, "partition": r.partition, "offset": r.offset,
                   "timestamp": r.timestamp}, flush=False)
    else:
        sys.stdout.write(f"partition {r.partition} offset {r.offset}\n")
    n.confirmed += 1   # counted once its line is written
