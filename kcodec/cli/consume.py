"""``kcodec consume``: print the records of topics.

Output (stdout's binary buffer): by default each record's value as the bytes it is and a
newline (``-D`` another delimiter), with ``-K DELIM`` its key and DELIM first, as kcat
prints them; ``--format text`` one escaped line per record with partition, offset, key and
headers; ``--json`` JSON lines (bytes as UTF-8 text or ``{"base64": ...}``; ``--base64``:
always a base64 string).

Where to start, per partition (all of the topics', or ``-p``'s): ``-o`` as kcat takes it
(beginning, end, stored, an offset N, -N before the end, s@TS), and e@TS stops before the
first record at or after TS. On stderr, a notice when a partition's end is reached
(``-e``: exit once every partition has reached it).

With ``-g`` it is a group member that commits exactly what it printed: never a record it
did not print (commits happen after the lines are flushed: every 5 s, when partitions are
revoked, and at the end), so a resumed consume starts right after the last printed line.
SIGINT and SIGTERM end it cleanly: the current line is finished, the printed offsets are
committed, and it exits 130 (SIGINT) or 143 (SIGTERM); a second signal exits at once.

With ``--share-group G`` it is a member of a share group (KIP-932): several such consumers
share the records of the same partitions, each record printed by one of them. Each printed
record is acknowledged (ACCEPT) after its line is flushed; records fetched but not printed
(a signal, ``-n``) are released to the other members at the end. Where it starts is the
group's ``share.auto.offset.reset`` (latest unless set), not ``-o``.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from kcodec.cli._client import (
    BrokerWatch,
    Graceful,
    Once,
    Ticker,
    UsageError,
    add_connection,
    add_settings,
    apply_settings,
    client_config,
    guarded,
    require_topics,
    required,
    show,
    text,
)
from kcodec.cli._io import parse_delimiter

NAME = "consume"
HELP = "print records of topics (as a group member with -g)"
EXAMPLES = [
    "kcodec consume -t events -o beginning -e          # everything, then exit",
    "kcodec consume -t events -g reports               # as a group member, committing",
    "kcodec consume -t events -f '%t %p %o %k %s\\n' -e # kcat's format string",
    "kcodec consume -t events --json -n 10 -X fetch_max_bytes=1048576",
]
COMMIT_EVERY = 5.0   # seconds between commits of what was printed (-g)
FORMATS = ("raw", "text", "json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    required(parser).add_argument("-t", "--topic", action="append", required=True,
                                  help="topic to read (repeatable)")
    parser.add_argument("-g", "--group", action=Once,
                        help="consumer group: join it and commit what was printed")
    parser.add_argument("--group-protocol", choices=("consumer", "classic"), default="consumer",
                        help="with -g: the group protocol (default consumer, KIP-848; "
                             "classic where the broker lacks it, with a notice)")
    parser.add_argument("--share-group", action=Once, metavar="GROUP",
                        help="share group (KIP-932): join it, print the records the brokers "
                             "hand this member, acknowledge each printed one; several "
                             "consumers of one share group split a partition's records")
    parser.add_argument("-p", "--partition", type=int, action="append",
                        help="only this partition (repeatable; with one -t, without -g)")
    parser.add_argument("-o", "--offset", action="append", metavar="OFFSET",
                        help="where to start, as kcat takes it: beginning, end (the default), "
                             "stored (the group's committed offsets), N (that offset), -N (N "
                             "records before the end), s@MS (the first record at or after MS, "
                             "milliseconds since the epoch); and e@MS, besides one of those: "
                             "stop before the first record at or after MS. With -g only "
                             "beginning or end (where nothing is committed), stored and e@MS")
    parser.add_argument("--from-beginning", action="store_true", help="the same as -o beginning")
    parser.add_argument("-e", "--exit", action="store_true",
                        help="exit once every partition has reached its end")
    parser.add_argument("-n", "--count", type=int, help="stop after this many records")
    parser.add_argument("--idle", type=float, metavar="SECONDS",
                        help="stop when no record came for this long")
    add_settings(parser, "consumer")
    out = parser.add_argument_group("output")
    out.add_argument("--format", choices=FORMATS,
                     help="raw (the default): each value as the bytes it is, then -D; text: "
                          "one line per record, partition:offset key=... headers=[...] value, "
                          "with control characters, backslashes and bytes that are not UTF-8 "
                          "escaped; json: the same as --json")
    out.add_argument("-f", "--format-string", metavar="FMT",
                     help="each record as kcat's -f: %%t topic, %%p partition, %%o offset, "
                          "%%T timestamp, %%k key, %%K key length, %%s value, %%S value "
                          "length, %%R value length (4 bytes), %%h headers, %%%% a percent; "
                          "escapes \\n \\t \\r \\0 \\xNN (e.g. -f '%%p:%%o %%k=%%s\\n')")
    out.add_argument("-K", "--key-delimiter", metavar="DELIM",
                     help="raw: print each key and DELIM before the value (kcat's -K); "
                          "escapes \\t \\n \\r \\0 \\\\ \\xNN")
    out.add_argument("-D", "--delimiter", metavar="DELIM",
                     help="raw: what follows each message (default \\n)")
    out.add_argument("--base64", action="store_true",
                     help="json: keys, values and header values always as base64 strings "
                          "(by default UTF-8 text, or {\"base64\": ...} when not UTF-8)")
    out.add_argument("-q", "--quiet", action="store_true",
                     help="no notices on stderr (a partition's end reached, a start offset "
                          "moved into the log)")
    add_connection(parser)


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.client import Admin
    from kcodec.errors import KcodecError

    if args.count is not None and args.count < 1:
        raise UsageError(f"--count must be positive, got {args.count}")
    fmt = args.format or ("json" if args.json else "raw")
    if args.json and fmt != "json":
        raise UsageError(f"--json and --format {fmt}: give one")
    if args.format_string is not None:
        if args.format or args.json:
            raise UsageError("-f and --format/--json: give one")
        fmt = "string"
    for flag, value, needs in (("-K", args.key_delimiter, "raw"), ("-D", args.delimiter, "raw"),
                               ("--base64", args.base64 or None, "json")):
        if value is not None and fmt != needs:
            raise UsageError(f"{flag} applies to --format {needs} output, not {fmt}")
    topics = list(dict.fromkeys(args.topic))
    if args.share_group is not None:
        return _share(args, fmt, topics)
    from kcodec.cli._positions import parse_offsets, start_offsets

    start, stop = parse_offsets(args)
    if args.partition and args.group:
        raise UsageError("-p picks partitions without a group; a group member (-g) reads "
                         "the partitions the group assigns it")
    if args.partition and len(topics) > 1:
        raise UsageError("-p picks partitions of one topic: give one -t")
    if any(p < 0 for p in args.partition or []):
        raise UsageError(f"partition must be non-negative, got {min(args.partition)}")
    reset = "earliest" if start.kind == "beginning" else "latest"
    cfg = client_config(args, auto_offset_reset=reset, fetch_max_wait_ms=100)
    if args.group:
        cfg.update(group_id=args.group, session_timeout_ms=10000, heartbeat_interval_ms=1000,
                   enable_auto_commit=False, group_protocol=args.group_protocol)
    cfg = _settings(cfg, args)
    with Admin(**client_config(args)) as admin:
        md = require_topics(admin, topics)   # a missing topic fails here, naming it
        parts = [(t.name, p.partition) for t in md.topics for p in t.partitions]
        if args.partition:
            have = {p for _, p in parts}
            bad = [p for p in dict.fromkeys(args.partition) if p not in have]
            if bad:
                raise KcodecError(f"topic {topics[0]!r} has partitions 0..{len(have) - 1}: no "
                                  f"partition {', '.join(map(str, bad))}")
            parts = [(topics[0], p) for p in dict.fromkeys(args.partition)]
        seeks = start_offsets(admin, parts, start, args.quiet)
        if args.group and not args.quiet and start.kind != "beginning":
            _uncommitted_notice(admin, args.group, topics, parts)
    with Graceful() as sig:
        return _consume(args, cfg, topics, parts, seeks, stop, _writer(args, fmt, len(topics) > 1), sig)


def _uncommitted_notice(admin: Any, group: str, topics: list[str],
                        parts: list[tuple[str, int]]) -> None:
    """Say which partitions the group has no committed offset for: a member starts those
    at their end (-o end, the default), past the records already there."""
    from kcodec.client import KafkaError, TopicPartition

    try:
        committed = admin.committed_offsets(group, topics)
        tps = [TopicPartition(t, p) for t, p in parts]
        missing = [tp for tp in tps if tp not in committed]
        ends = admin.list_offsets(missing, "latest") if missing else {}
    except KafkaError:
        return                       # the notice is a courtesy: the consume goes on
    waiting = [(tp, ends.get(tp, 0)) for tp in missing if ends.get(tp, 0) > 0]
    if not waiting:
        return
    total = sum(n for _, n in waiting)
    shown = ", ".join(f"{tp.topic}[{tp.partition}]" for tp, _ in waiting[:5])
    more = f" and {len(waiting) - 5} more" if len(waiting) > 5 else ""
    print(f"kcodec consume: group {group!r} has no committed offset for {shown}{more}: they "
          f"start at their end, past the {total} records already there (-o beginning reads "
          "them)", file=sys.stderr)


def _settings(cfg: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    from kcodec.client import ConsumerConfig

    return apply_settings(cfg, args.settings, ConsumerConfig)


def _all(render: Callable[[Any, Any], bytes]) -> Callable[[Any, list], bytes]:
    """``_writer``'s function for a partition's list of records at once."""
    if getattr(render, "end", None) is not None:     # raw values: joined in one call
        end = render.end                              # type: ignore[attr-defined]

        def values(tp: Any, recs: list) -> bytes:
            return end.join([r.value or b"" for r in recs]) + end
        return values
    return lambda tp, recs: b"".join([render(tp, r) for r in recs])


def _numpy() -> bool:
    """Whether numpy (what columns need) is installed."""
    import importlib.util

    return importlib.util.find_spec("numpy") is not None


def _writer(args: argparse.Namespace, fmt: str, many: bool) -> Callable[[Any, Any], bytes]:
    """The bytes printed for one record (``(partition, record)``) in the chosen format."""
    if fmt == "string":
        from kcodec.cli._format import compile_format

        return compile_format(args.format_string)
    if fmt == "raw":
        end = b"\n" if args.delimiter is None else parse_delimiter(args.delimiter, "-D")
        if args.key_delimiter is None:
            def value(tp: Any, r: Any) -> bytes:
                return (r.value or b"") + end
            value.end = end  # type: ignore[attr-defined]
            return value
        kd = parse_delimiter(args.key_delimiter, "-K")
        return lambda tp, r: (r.key or b"") + kd + (r.value or b"") + end
    if fmt == "json":
        b64 = args.base64

        def as_json(tp: Any, r: Any) -> bytes:
            return json.dumps({"topic": tp.topic, "partition": tp.partition, "offset": r.offset,
                               "timestamp": r.timestamp, "key": text(r.key, b64),
                               "value": text(r.value, b64),
                               "headers": [[k, text(v, b64)] for k, v in r.headers]},
                              separators=(",", ":")).encode() + b"\n"
        return as_json

    def as_text(tp: Any, r: Any) -> bytes:
        where = f"{tp.topic}:{tp.partition}:{r.offset}" if many else f"{tp.partition}:{r.offset}"
        key = "" if r.key is None else f" key={show(r.key)}"
        hdrs = ""
        if r.headers:
            hdrs = " headers=[" + ", ".join(f"{show(k.encode() if isinstance(k, str) else k)}="
                                            f"{show(v)}" for k, v in r.headers) + "]"
        return f"{where}{key}{hdrs} {show(r.value)}\n".encode()
    return as_text


def _consume(args: argparse.Namespace, cfg: dict[str, Any], topics: list[str],
             parts: list[tuple[str, int]], seeks: dict[Any, int], stop: int | None,
             render: Callable[[Any, Any], bytes], sig: Graceful) -> int:
    from kcodec.client import BrokerNotAvailableError, Consumer, RebalanceListener, TopicPartition
    from kcodec.errors import KcodecError

    printed: dict[Any, int] = {}     # partition -> offset after its last printed record
    committed: dict[Any, int] = {}
    c = Consumer(**cfg)
    sys.stdout.flush()
    out = sys.stdout.buffer          # records are bytes: printed as they are

    def commit(only: Any = None, quiet: bool = False) -> None:
        todo = {tp: o for tp, o in printed.items()
                if committed.get(tp) != o and (only is None or tp in only)}
        if todo:
            out.flush()              # commit nothing that is not out of the process yet
            try:
                c.commit(todo)
            except KcodecError:
                if not quiet:
                    raise
                return               # e.g. a rebalance under way: the next commit has it
            committed.update(todo)

    inflight: list = []              # the periodic commit in the background, if any
    closing = False

    def commit_in_background() -> None:
        """The periodic commit, without waiting for it: a broker that stopped answering is
        noticed by the polls within --timeout, not after a commit's own wait."""
        if inflight and not inflight[0].done():
            return
        inflight.clear()
        todo = {tp: o for tp, o in printed.items() if committed.get(tp) != o}
        if not todo:
            return
        out.flush()                  # commit nothing that is not out of the process yet

        def done(fut: Any) -> None:
            if not fut.cancelled() and fut.exception() is None:
                for tp, o in todo.items():   # (a later commit may have gone further)
                    if committed.get(tp, -1) < o:
                        committed[tp] = o
        fut = c.commit_async(todo)
        fut.add_done_callback(done)
        inflight.append(fut)

    def settle() -> None:
        """Wait (at most --timeout) for a background commit, so that it cannot land after
        the final one."""
        if inflight:
            try:
                inflight[0].result(args.timeout)
            except Exception:        # noqa: BLE001 - its failure: the final commit has it
                pass
            inflight.clear()

    class Listener(RebalanceListener):
        def on_partitions_revoked(self, revoked: list) -> None:
            # the next owner starts after the last printed line; not when closing: the end
            # commits (or the brokers are gone, and a commit would only wait for them)
            if not sig.stop and not closing:
                settle()
                commit(set(revoked), quiet=True)

        def on_partitions_lost(self, lost: list) -> None:
            for tp in lost:
                printed.pop(tp, None)

    n = 0
    last = last_commit = time.monotonic()
    ticker = Ticker("consumed {n} records, {rate}/s, {secs:.0f} s")
    from kcodec.cli._positions import Ends

    ends = Ends(c, args.quiet)
    render_all = _all(render)
    # raw values (no key delimiter): each blob decoded as columns and its values written in
    # one piece, with no record object made (about a tenth of the CPU); else records
    columns = getattr(render, "end", None) is not None and _numpy()
    if columns:
        from kcodec.records.columns import join_values
    stopped: set = set()             # partitions that reached the stop time (-o e@MS)
    ok = False
    watch = BrokerWatch(c, "consume", args.timeout).start()
    try:
        if args.group:
            c.subscribe(topics, Listener())
        else:
            c.assign([TopicPartition(t, p) for t, p in parts])
            for tp, offset in seeks.items():
                c.seek(tp, offset)
        while (args.count is None or n < args.count) and not sig.stop:
            if columns:
                batch = c.poll_columns(0.2)
            else:
                batch = c.poll(0.2, max_records=None if args.count is None else args.count - n)
            if not batch:
                if args.idle is not None and time.monotonic() - last > args.idle:
                    break
            else:
                last = time.monotonic()
                for tp, recs in sorted(batch.items()):
                    if tp in stopped:
                        continue
                    if sig.stop:
                        break
                    if columns:              # one blob's records as columns
                        count = len(recs.value)
                        take = count if args.count is None else min(count, args.count - n)
                        offsets = recs.offset
                        if stop is not None:
                            hit = (recs.timestamp[:take] >= stop).nonzero()[0]
                            at_stop = int(hit[0]) if len(hit) else None
                        else:
                            at_stop = None
                        if at_stop is not None:
                            take = at_stop
                            stop_offset = int(offsets[at_stop])
                        if take:             # the values and their delimiters in one piece
                            vals = recs.value
                            out.write(join_values(vals.offsets[:take + 1], vals.data,
                                                  render.end))  # type: ignore[attr-defined]
                            printed[tp] = int(offsets[take - 1]) + 1
                            n += take
                    else:
                        take = len(recs)
                        at_stop = None
                        if stop is not None:  # up to the first record at or after the stop time
                            at_stop = next((i for i, r in enumerate(recs) if r.timestamp >= stop),
                                           None)
                            if at_stop is not None:
                                take = at_stop
                                stop_offset = recs[at_stop].offset
                        if take:             # one write per partition's records, not per record
                            out.write(render_all(tp, recs[:take] if take < len(recs) else recs))
                            printed[tp] = recs[take - 1].offset + 1
                            n += take
                    if at_stop is not None:
                        stopped.add(tp)
                        c.pause(tp)
                        ends.notice(f"reached the stop time in {tp.topic}[{tp.partition}] "
                                    f"at offset {stop_offset}")
                out.flush()
            ticker.update(n=n)       # also while idle: the line shows the last count
            assigned = c.assignment()
            if args.exit or not args.quiet:
                ends.check(assigned - stopped, batch, printed)
            done = assigned and (stop is not None or args.exit) and \
                assigned <= stopped | (ends.reached if args.exit else set())
            if done:
                ends.say(": exiting")
                break
            ends.say()
            if args.group and time.monotonic() - last_commit >= COMMIT_EVERY:
                commit_in_background()
                last_commit = time.monotonic()
        ok = True
    except BrokerNotAvailableError:
        raise   # the brokers are gone: no commit to try; close below without waiting
    finally:
        ticker.close()
        try:
            if ok and args.group:
                settle()
                commit()
        finally:
            closing = True
            watch.stop()
            _close(c, args.timeout if ok else 1.0)
    if sig.stop:
        name = signal.Signals(sig.signum).name
        done = f"; group {args.group!r} committed up to the last printed line" \
            if args.group and printed else ""
        print(f"kcodec consume: interrupted ({name}): {n} records printed{done}", file=sys.stderr)
    return sig.exit_code


def _share(args: argparse.Namespace, fmt: str, topics: list[str]) -> int:
    from kcodec.client import Admin

    for flag, given in (("-g", args.group), ("-p", args.partition), ("-o", args.offset),
                        ("--from-beginning", args.from_beginning or None),
                        ("-e", args.exit or None)):
        if given is not None:
            why = {"-g": "give a consumer group or a share group, not both",
                   "-p": "a share group's members read the partitions the group assigns",
                   "-e": "a share group has no end to reach: use -n or --idle"}.get(
                flag, "a share group starts where its share.auto.offset.reset config says "
                      "(latest unless set; any admin client sets it on the group, e.g. "
                      "kafka-configs --entity-type groups --entity-name G --alter "
                      "--add-config share.auto.offset.reset=earliest)")
            raise UsageError(f"{flag} with --share-group: {why}")
    cfg = _settings(client_config(args, group_id=args.share_group, fetch_max_wait_ms=100,
                                  share_acknowledgement_mode="explicit"), args)
    with Admin(**client_config(args)) as admin:
        require_topics(admin, topics)        # a missing topic fails here, naming it
    with Graceful() as sig:
        return _share_consume(args, cfg, topics, _writer(args, fmt, len(topics) > 1), sig)


def _share_consume(args: argparse.Namespace, cfg: dict[str, Any], topics: list[str],
                   render: Callable[[Any, Any], bytes], sig: Graceful) -> int:
    from kcodec.client import ShareConsumer, TopicPartition
    from kcodec.client.share import ACCEPT

    c = ShareConsumer(**cfg)
    sys.stdout.flush()
    out = sys.stdout.buffer
    n = 0
    last = time.monotonic()
    ticker = Ticker("consumed {n} records, {rate}/s, {secs:.0f} s")
    ok = False
    watch = BrokerWatch(c, "consume", args.timeout).start()
    try:
        c.subscribe(topics)
        while (args.count is None or n < args.count) and not sig.stop:
            recs = c.poll(0.2, max_records=None if args.count is None else args.count - n)
            if not recs:
                if args.idle is not None and time.monotonic() - last > args.idle:
                    break
                ticker.update(n=n)
                continue
            last = time.monotonic()
            printed = []
            for r in recs:
                if sig.stop:
                    break
                out.write(render(TopicPartition(r.topic, r.partition), r))
                printed.append(r)
            out.flush()              # acknowledge nothing that is not out of the process
            for r in printed:
                c.acknowledge(r, ACCEPT)
            n += len(printed)
            ticker.update(n=n)
        ok = True
    finally:
        ticker.close()
        try:
            if ok:
                c.commit_sync(args.timeout)
        finally:
            watch.stop()
            _close(c, args.timeout if ok else 1.0)
    if sig.stop:
        name = signal.Signals(sig.signum).name
        print(f"kcodec consume: interrupted ({name}): {n} records printed and acknowledged "
              f"in share group {args.share_group!r}", file=sys.stderr)
    return sig.exit_code


def _close(c: Any, timeout: float) -> None:
    from kcodec.errors import KcodecError

    try:
        c.close(timeout)
    except KcodecError:
        pass   # leaving the group is a courtesy; the session timeout does it too
