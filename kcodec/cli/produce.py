"""``kcodec produce``: send messages (arguments, or records of stdin) to a topic.

Messages, keys and header values are bytes, sent exactly as given (bytes that are not
UTF-8, NULs): stdin is split at newlines (``-D`` another delimiter) and ``-K`` takes each
key from its line, as kcat does. Prints one line per confirmed record (in input order) and
a summary on stderr. A topic that does not exist is created if the broker does that (a
notice says so, with a near existing name) or is an error before any input is read.

Each record must be confirmed within ``--timeout`` (the producer's ``delivery_timeout_ms``).
Every stop before the end of the input -- a record that failed or was refused, an input
line over ``--max-line-bytes``, SIGINT, SIGTERM -- waits (at most ``--timeout``) for what
was sent (not after a failure), prints those confirmations, then says on stderr how many
lines were confirmed, how many were sent but not confirmed (they may or may not be in the
topic), what became of the rest of the input, and the line to resume from; exit code 1
(a failure), 130 (SIGINT) or 143 (SIGTERM).
"""

from __future__ import annotations

import argparse
import queue
import sys
import threading
import time
from typing import Any

from kcodec.cli._client import (
    BrokerWatch,
    Graceful,
    Interrupted,
    Once,
    Ticker,
    UsageError,
    add_connection,
    add_settings,
    apply_settings,
    client_config,
    did_you_mean,
    guarded,
    json_line,
    required,
    show,
)
from kcodec.cli._io import TooLong, arg_bytes, parse_delimiter, read_records, split_key

NAME = "produce"
HELP = "send messages to a topic (arguments, or one per line of stdin)"
EXAMPLES = [
    "kcodec produce -t events hello world        # two messages",
    "kcodec produce -t events < lines.txt        # one record per line",
    "kcodec produce -t events -K : < keyed.txt   # KEY:VALUE lines",
    "kcodec produce -t events -q < big.txt       # only the summary (kcat's speed)",
    "kcodec produce -t big --max-line-bytes 60000000 -X buffer_memory=134217728 < big.bin",
]
MAX_LINE = 1048576   # Kafka's max.request.size default: a larger record seldom gets through
RECORD_OVERHEAD = 64 * 1024   # room for a record's framing, key and headers beside its line
BATCH_SIZE = 1000000   # kcat's (librdkafka's batch.size): a line-per-record flood in few batches


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kcodec.client.config import COMPRESSION_TYPES

    required(parser).add_argument("-t", "--topic", action=Once, required=True,
                                  help="topic to write to")
    parser.add_argument("-p", "--partition", type=int,
                        help="partition (default: by key; keyless records: sticky, KIP-794)")
    parser.add_argument("-k", "--key", help="key of every message (the bytes as typed)")
    parser.add_argument("-K", "--key-delimiter", metavar="DELIM",
                        help="each line is KEY DELIM VALUE (kcat's -K): the key is what comes "
                             "before the first DELIM; a line without DELIM gets -k's key, or "
                             "none. Escapes: \\t \\n \\r \\0 \\\\ \\xNN")
    parser.add_argument("-D", "--delimiter", metavar="DELIM",
                        help="what ends each message on stdin (default \\n; e.g. '\\x00' "
                             "for values that hold newlines); escapes as for -K")
    parser.add_argument("--max-line-bytes", type=int, default=MAX_LINE, metavar="BYTES",
                        help="stop at an input line longer than this, before reading it "
                             "whole (default %(default)s, Kafka's max.request.size)")
    parser.add_argument("-c", "--compression", default="none",
                        help=f"compression codec: {', '.join(COMPRESSION_TYPES)} (default none)")
    parser.add_argument("-H", "--header", action="append", default=[], metavar="KEY=VALUE",
                        help="a header on every message (repeatable; the value is bytes as "
                             "typed, the key must be UTF-8)")
    parser.add_argument("--acks", default="all", help="0, 1 or all (default all)")
    parser.add_argument("--partitioner", metavar="NAME|MODULE:ATTR",
                        help="how records without -p get a partition: murmur2_random "
                             "(default), murmur2, consistent, consistent_random, random, or "
                             "a function (topic, key, partition_count) -> int named "
                             "module:attr (importable from the current directory)")
    parser.add_argument("messages", nargs="*", metavar="MESSAGE",
                        help="messages to send; none: read lines from stdin")
    add_settings(parser, "producer")
    out = parser.add_argument_group("output")
    out.add_argument("-q", "--quiet", action="store_true",
                     help="no line per record: only the summary on stderr (the default when "
                          "stdout is a terminal)")
    out.add_argument("--each", action="store_true",
                     help="a line per confirmed record (partition N offset M, or --json) even "
                          "when stdout is a terminal (the default when it is not)")
    add_connection(parser)


class _Options:
    def __init__(self, key: bytes | None, key_delimiter: bytes | None, delimiter: bytes,
                 headers: list[tuple[str, bytes]]) -> None:
        self.key = key                       # -k
        self.key_delimiter = key_delimiter   # -K
        self.delimiter = delimiter           # -D
        self.headers = headers               # -H


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.client.config import COMPRESSION_TYPES

    if args.compression not in COMPRESSION_TYPES:
        raise UsageError(f"unknown compression codec {args.compression!r} "
                         f"(choose from {', '.join(COMPRESSION_TYPES)})")
    if args.partition is not None and args.partition < 0:
        raise UsageError(f"partition must be non-negative, got {args.partition}")
    if args.partition is not None and args.key is not None:
        raise UsageError("give either -p PARTITION or -k KEY, not both")
    if args.partition is not None and args.key_delimiter is not None:
        raise UsageError("give either -p PARTITION or -K DELIM (keys pick partitions), not both")
    if args.messages and args.delimiter is not None:
        raise UsageError("-D splits stdin; MESSAGE arguments are one message each")
    if args.max_line_bytes < 1:
        raise UsageError(f"--max-line-bytes must be positive, got {args.max_line_bytes}")
    if args.quiet and args.each:
        raise UsageError("-q and --each: give one")
    opts = _Options(
        key=None if args.key is None else arg_bytes(args.key),
        key_delimiter=None if args.key_delimiter is None else parse_delimiter(args.key_delimiter, "-K"),
        delimiter=b"\n" if args.delimiter is None else parse_delimiter(args.delimiter, "-D"),
        headers=_headers(args.header))
    acks = args.acks
    ms = int(args.timeout * 1000)
    # a line --max-line-bytes lets through must not be refused by the producer's own size
    # check: its max_request_size covers such a line plus a record's framing and headers
    # (the broker's max.message.bytes still decides)
    cfg = client_config(args, compression_type=args.compression, acks=acks,
                        enable_idempotence=acks in ("all", "-1"), linger_ms=5,
                        batch_size=BATCH_SIZE,
                        delivery_timeout_ms=ms,
                        max_request_size=max(MAX_LINE, args.max_line_bytes + RECORD_OVERHEAD))
    if args.partitioner is not None:
        if "" not in sys.path:       # module:attr from where the command runs, as python -m
            sys.path.insert(0, "")
        cfg["partitioner"] = args.partitioner
    from kcodec.client import ProducerConfig

    cfg = apply_settings(cfg, args.settings, ProducerConfig)
    ProducerConfig.from_kwargs(cfg)  # a bad value (--acks 2) is a usage error before connecting
    with Graceful() as sig:
        return _produce(args, opts, cfg, client_config(args), sig)


def _headers(specs: list[str]) -> list[tuple[str, bytes]]:
    out = []
    for h in specs:
        k, sep, v = h.partition("=")
        if not sep or not k:
            raise UsageError(f"header {h!r} is not KEY=VALUE")
        try:
            k.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(f"header key {show(arg_bytes(k))} is not UTF-8: Kafka header keys "
                             "are text (their values may be any bytes)") from None
        out.append((k, arg_bytes(v)))
    return out


def _find_topic(args: argparse.Namespace, admin_cfg: dict[str, Any]) -> tuple[int | None, str | None]:
    """``(partitions, near)`` of the topic: ``near`` is None when it existed, else the
    " (did you mean ...)" part ("" if no name is near) and the broker has just created it
    (``partitions`` None: still being created). A topic the broker does not create is an
    error that says how to make it."""
    from kcodec.client import Admin, KafkaError
    from kcodec.errors import KcodecError
    from kcodec.protocol import ErrorCode

    unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with Admin(**admin_cfg) as admin:
        try:
            md = admin.describe_cluster([args.topic])
            return len(md.topics[0].partitions), None
        except KafkaError as exc:
            if exc.code != unknown:
                if exc.retriable:            # e.g. its leader is moving: the producer waits
                    return None, None
                raise
        near = did_you_mean(args.topic, [t.name for t in admin.describe_cluster().topics])
        try:
            md = admin.describe_cluster([args.topic], allow_auto_create=True)
            return len(md.topics[0].partitions), near
        except KafkaError as exc:
            if exc.code == unknown:
                raise KcodecError(f"topic {args.topic!r} does not exist{near}, and the broker does "
                                  "not create topics on first use: 'kcodec topics create "
                                  f"{args.topic}' makes it") from None
            if not exc.retriable:
                raise
            return None, near                # being created: the producer waits for it


class _Tally:
    def __init__(self) -> None:
        self.read = self.sent = self.confirmed = self.failed = 0
        self.first_failed = 0        # line number of the first record that failed (0: none)
        self.longest = (0, 0)        # (bytes, line number) of the longest line sent
        self.eof = False             # the input ended (as opposed to: reading stopped)
        self.each = True             # a line per confirmed record on stdout
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


def _produce(args: argparse.Namespace, opts: _Options, cfg: dict[str, Any],
             admin_cfg: dict[str, Any], sig: Graceful) -> int:
    from kcodec.client import Producer
    from kcodec.errors import KcodecError

    producer = None
    sig.interruptible = True         # finding the topic and the brokers: a signal stops it
    try:
        count, near = _find_topic(args, admin_cfg)
        producer = Producer(**cfg)
        if count is None:            # being created: wait for its partitions
            count = len(producer.partitions_for(args.topic))
    except Interrupted:
        if producer is not None:
            producer.close(0)
        print("kcodec produce: interrupted before any input was read: nothing sent",
              file=sys.stderr)
        return sig.exit_code
    except KcodecError as exc:
        if producer is not None:
            producer.close(0)
        raise KcodecError(f"{exc} (nothing sent, no input read)") from None
    finally:
        sig.interruptible = False
    if near is not None:
        undo = f"; 'kcodec topics delete {args.topic}' removes it" if near else ""
        print(f"kcodec produce: topic {args.topic!r} did not exist: the broker created it with "
              f"{count} partition{'s' * (count != 1)}{near}{undo}", file=sys.stderr)
    watch = BrokerWatch(producer, "produce", args.timeout).start()
    try:
        if args.partition is not None and args.partition >= count:
            raise UsageError(f"partition {args.partition} out of range for {args.topic!r} "
                             f"({count} partitions)")
        if _blocks_apply(args, opts):
            return _send_blocks(args, opts, producer, sig)
        return _send_all(args, opts, producer, sig)
    finally:
        watch.stop()
        producer.close(0)            # what is still unconfirmed stays unconfirmed


def _send_all(args: argparse.Namespace, opts: _Options, producer: Any, sig: Graceful) -> int:
    from kcodec.errors import KcodecError

    n = _Tally()
    n.each = _each(args)
    stopped_reading: BaseException | None = None   # the input's fault: what was sent is awaited
    what = "message" if args.messages else "line"
    limit = args.max_line_bytes
    ticker = Ticker("sent {sent} records, {n} confirmed, {rate}/s, {secs:.0f} s",
                    quiet_stdout=not n.each)
    t0 = time.monotonic()
    reporter = _Reporter(args, n)
    reporter.start()
    send, topic, partition = producer.send, args.topic, args.partition
    key_delimiter, key, headers = opts.key_delimiter, opts.key, opts.headers or None
    enqueue = reporter.queue.put
    try:
        source = (map(arg_bytes, args.messages) if args.messages
                  else read_records(sys.stdin.buffer, opts.delimiter, limit))
        while not sig.stop and n.error is None:
            sig.interruptible = True     # blocked on input: a signal may stop the read
            try:
                line = next(source, None)
            except Interrupted:
                break
            except TooLong:
                n.read += 1
                stopped_reading = _too_long(what, n.read, limit)
                break
            except OSError as exc:
                stopped_reading = KcodecError(f"reading stdin after line {n.read}: {exc}")
                break
            finally:
                sig.interruptible = False
            if line is None:
                n.eof = True
                break
            n.read += 1
            size = len(line)
            if size > limit:             # (message arguments: stdin stops in read_records)
                stopped_reading = _too_long(what, n.read, limit)
                break
            if size > n.longest[0]:
                n.longest = (size, n.read)
            if key_delimiter is not None:
                key, value = split_key(line, key_delimiter, opts.key)
            else:
                value = line
            try:
                fut = send(topic, value, key=key, partition=partition, headers=headers)
            except (KcodecError, ValueError, TypeError) as exc:   # e.g. no buffer space in time
                n.error = exc                # not sent: the resume line is this one
                break
            enqueue(fut)
            n.sent += 1
            ticker.update(sent=n.sent, n=n.confirmed)
        # what was sent: wait for its confirmations, at most --timeout from here (their
        # own delivery timeouts, named, come first), keeping the progress line current
        reporter.queue.put(None)
        deadline = time.monotonic() + args.timeout + 1
        # after a failure the others are not waited for: the report's resume line is the
        # first line not confirmed, whatever becomes of the lines after it
        while reporter.is_alive() and time.monotonic() < deadline and n.error is None:
            reporter.join(0.25)
            ticker.update(sent=n.sent, n=n.confirmed)
        n.error = n.error or stopped_reading
    finally:
        reporter.give_up.set()
        reporter.queue.put(None)
        reporter.join(5)
        ticker.close()
    return _finish(args, n, sig, time.monotonic() - t0, what)


def _finish(args: argparse.Namespace, n: _Tally, sig: Graceful, secs: float, what: str) -> int:
    """The report on stderr and the exit code, once the input ended or the sending stopped."""
    unconfirmed = n.sent - n.confirmed - n.failed
    never = (len(args.messages) - n.read) if args.messages else None
    if sig.stop or n.error is not None or unconfirmed:
        stop = "interrupted" if sig.stop else "stopped"
        print(f"kcodec produce: {stop}: {n.confirmed} lines confirmed, {unconfirmed} sent but "
              f"unconfirmed (they may or may not be in {args.topic!r}), {n.failed} failed, "
              f"{_rest(args, n, never)}", file=sys.stderr)
        if n.error is not None:
            print(f"kcodec produce: error: {n.error}{_advice(n.error, n, what)}", file=sys.stderr)
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


def _each(args: argparse.Namespace) -> bool:
    """Whether a line per confirmed record is printed: --each, else not with -q, else
    when stdout is not a terminal (a terminal gets the summary only)."""
    if args.each or args.json:
        return not args.quiet
    if args.quiet:
        return False
    try:
        return not sys.stdout.isatty()
    except (AttributeError, ValueError):
        return True


def _blocks_apply(args: argparse.Namespace, opts: _Options) -> bool:
    """Whether stdin can go to the producer a block of lines at a time
    (``Producer.send_values``): no line per record to print, no per-line key or headers or
    partitioner."""
    if args.messages or _each(args) or args.partitioner is not None:
        return False
    return opts.key_delimiter is None and not opts.headers


class _BlockReporter(threading.Thread):
    """Counts the blocks of lines confirmed, in input order: a block is confirmed when
    every batch made of it is; the first failure stops the counting (the lines of that
    block and after it are sent but unconfirmed)."""

    def __init__(self, n: _Tally) -> None:
        super().__init__(name="kcodec-produce-blocks", daemon=True)
        self.n = n
        self.queue: queue.Queue = queue.Queue()
        self.give_up = threading.Event()

    def run(self) -> None:
        from kcodec.errors import KcodecError

        n = self.n
        while True:
            item = self.queue.get()
            if item is None:
                return
            futures, count = item
            for fut in futures:
                while not fut.done():
                    if self.give_up.is_set():
                        return
                    fut.exception(0.1)
                exc = fut.exception(0)
                if exc is not None:
                    if n.error is None:
                        n.error = exc if isinstance(exc, KcodecError) else KcodecError(str(exc))
                    return
            n.confirmed += count


def _send_blocks(args: argparse.Namespace, opts: _Options, producer: Any, sig: Graceful) -> int:
    """stdin to the topic a block of lines at a time (``Producer.send_values``): the
    same stops, reports and exit codes as line by line, at kcat's speed."""
    from kcodec.cli._io import read_blocks
    from kcodec.errors import KcodecError

    n = _Tally()
    stopped_reading: BaseException | None = None
    limit = args.max_line_bytes
    ticker = Ticker("sent {sent} records, {n} confirmed, {rate}/s, {secs:.0f} s{eta}",
                    quiet_stdout=True)
    total = _input_size(sys.stdin.buffer)
    t0 = time.monotonic()
    reporter = _BlockReporter(n)
    reporter.start()
    topic, key, part = args.topic, opts.key, args.partition
    try:
        source = read_blocks(sys.stdin.buffer, opts.delimiter, limit)
        while not sig.stop and n.error is None:
            sig.interruptible = True
            try:
                lines = next(source, None)
            except Interrupted:
                break
            except TooLong:
                n.read += 1
                stopped_reading = _too_long("line", n.read, limit)
                break
            except OSError as exc:
                stopped_reading = KcodecError(f"reading stdin after line {n.read}: {exc}")
                break
            finally:
                sig.interruptible = False
            if lines is None:
                n.eof = True
                break
            count = len(lines)
            n.read += count
            longest = max(map(len, lines))
            if longest > n.longest[0]:
                n.longest = (longest, n.read - count + 1
                             + next(i for i, x in enumerate(lines) if len(x) == longest))
            try:
                futures = producer.send_values(topic, lines, key=key, partition=part)
            except (KcodecError, ValueError, TypeError) as exc:
                n.read -= count              # not sent: the resume line is its first
                n.error = exc
                break
            reporter.queue.put((futures, count))
            n.sent += count
            if ticker.enabled:           # (a tell() per block otherwise wasted)
                ticker.update(sent=n.sent, n=n.confirmed, done=_position(sys.stdin.buffer),
                              total=total)
        reporter.queue.put(None)
        deadline = time.monotonic() + args.timeout + 1
        while reporter.is_alive() and time.monotonic() < deadline and n.error is None:
            reporter.join(0.25)
            ticker.update(sent=n.sent, n=n.confirmed)
        n.error = n.error or stopped_reading
    finally:
        reporter.give_up.set()
        reporter.queue.put(None)
        reporter.join(5)
        ticker.close()
    return _finish(args, n, sig, time.monotonic() - t0, "line")


def _input_size(stream: Any) -> int | None:
    """The size of stdin when it is a regular file (for the progress line's ETA)."""
    import os
    import stat

    try:
        st = os.fstat(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def _position(stream: Any) -> int | None:
    try:
        return int(stream.tell())
    except (AttributeError, OSError, ValueError):
        return None


def _too_long(what: str, number: int, limit: int) -> BaseException:
    from kcodec.errors import KcodecError

    return KcodecError(
        f"{what} {number} is longer than {limit} bytes (--max-line-bytes): not sent; brokers "
        "refuse records over their max.message.bytes (about 1 MB unless raised): split it, or "
        "raise --max-line-bytes and, if need be, the broker's or the topic's max.message.bytes")


def _advice(exc: BaseException, n: _Tally, what: str) -> str:
    """What to do about records the broker refused for their size (the producer splits a
    refused batch until the record alone is refused: the longest line sent says which one
    is likely too large)."""
    from kcodec.protocol import ErrorCode

    if getattr(exc, "code", None) in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        size, line = n.longest
        return (f" (the longest {what} sent is {what} {line}, {size} bytes: records larger than "
                "the broker's or the topic's max.message.bytes are refused (the records sent "
                "beside them still go through); send smaller records, or raise that limit, "
                "e.g. 'kcodec "
                "topics create --config max.message.bytes=N' for a new topic)")
    return ""


def _rest(args: argparse.Namespace, n: _Tally, never: int | None) -> str:
    """What became of the rest of the input, and the line to resume from: the first line
    not confirmed (every line before it is in the topic)."""
    bad = n.first_unconfirmed()
    unsent = n.read - n.sent         # 1: the last line read was refused before sending
    if never is not None:
        rest = f"{never + unsent} never sent"
        resume = bad or (n.sent + 1 if never + unsent else 0)
    else:
        if unsent:
            rest = f"line {n.read} not sent, input after it never read"
        elif n.eof:
            rest = f"input ended after line {n.read}"
        else:
            rest = f"input after line {n.read} never read"
        resume = bad or (0 if n.eof else n.sent + 1)
    if not resume:
        return rest
    what = "line" if never is None else "message"
    rest += f" (resume from {what} {resume})"
    again = n.confirmed - (resume - 1)
    if again > 0:
        rest += f"; {again} confirmed lines after it would be sent again"
    return rest


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
    if not n.each:
        pass
    elif args.json:
        json_line({"topic": args.topic, "partition": r.partition, "offset": r.offset,
                   "timestamp": r.timestamp}, flush=False)
    else:
        sys.stdout.write(f"partition {r.partition} offset {r.offset}\n")
    n.confirmed += 1   # counted once its line is written
