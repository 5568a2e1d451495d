"""``kcodec consume``: print the records of topics.

With ``-g`` it is a group member that commits exactly what it printed: never a record it
did not print (commits happen after the lines are flushed: every 5 s, when partitions are
revoked, and at the end), so a resumed consume starts right after the last printed line.
SIGINT and SIGTERM end it cleanly: the current line is finished, the printed offsets are
committed, and it exits 130 (SIGINT) or 143 (SIGTERM); a second signal exits at once.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from typing import Any

from kcodec.cli._client import (
    Graceful,
    Once,
    Ticker,
    UsageError,
    add_connection,
    client_config,
    guarded,
    json_line,
    required,
    show,
    text,
)

NAME = "consume"
HELP = "print records of topics (as a group member with -g)"
COMMIT_EVERY = 5.0   # seconds between commits of what was printed (-g)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    required(parser).add_argument("-t", "--topic", action="append", required=True,
                                  help="topic to read (repeatable)")
    parser.add_argument("-g", "--group", action=Once,
                        help="consumer group: join it and commit what was printed")
    parser.add_argument("--from-beginning", action="store_true",
                        help="start at the earliest offset when there is no committed one")
    parser.add_argument("-n", "--count", type=int, help="stop after this many records")
    parser.add_argument("--idle", type=float, metavar="SECONDS",
                        help="stop when no record came for this long")
    add_connection(parser)


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.client import Admin

    if args.count is not None and args.count < 1:
        raise UsageError(f"--count must be positive, got {args.count}")
    topics = list(dict.fromkeys(args.topic))
    cfg = client_config(args, auto_offset_reset="earliest" if args.from_beginning else "latest",
                        fetch_max_wait_ms=100)
    with Admin(**client_config(args)) as admin:
        md = admin.describe_cluster(topics)   # a missing topic fails here, naming it
    parts = [(t.name, p.partition) for t in md.topics for p in t.partitions]
    if args.group:
        cfg.update(group_id=args.group, session_timeout_ms=10000, heartbeat_interval_ms=1000,
                   enable_auto_commit=False)
    with Graceful() as sig:
        return _consume(args, cfg, topics, parts, sig)


def _consume(args: argparse.Namespace, cfg: dict[str, Any], topics: list[str],
             parts: list[tuple[str, int]], sig: Graceful) -> int:
    from kcodec.client import BrokerNotAvailableError, Consumer, RebalanceListener, TopicPartition
    from kcodec.errors import KcodecError

    printed: dict[Any, int] = {}     # partition -> offset after its last printed record
    committed: dict[Any, int] = {}
    c = Consumer(**cfg)
    out = sys.stdout
    many = len(topics) > 1

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
    ticker = Ticker("consumed {n} records in {secs:.0f} s")
    ok = False
    try:
        if args.group:
            c.subscribe(topics, Listener())
        else:
            c.assign([TopicPartition(t, p) for t, p in parts])
        while (args.count is None or n < args.count) and not sig.stop:
            batch = c.poll(0.2, max_records=None if args.count is None else args.count - n)
            if not batch:
                if args.idle is not None and time.monotonic() - last > args.idle:
                    break
            else:
                last = time.monotonic()
                for tp, recs in sorted(batch.items()):
                    for r in recs:
                        if sig.stop:
                            break
                        _print(args, tp, r, many, out)
                        printed[tp] = r.offset + 1
                        n += 1
                out.flush()
            ticker.update(n=n)       # also while idle: the line shows the last count
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
            _close(c, args.timeout if ok else 1.0)
    if sig.stop:
        name = signal.Signals(sig.signum).name
        done = f"; group {args.group!r} committed up to the last printed line" \
            if args.group and printed else ""
        print(f"kcodec consume: interrupted ({name}): {n} records printed{done}", file=sys.stderr)
    return sig.exit_code


def _close(c: Any, timeout: float) -> None:
    from kcodec.errors import KcodecError

    try:
        c.close(timeout)
    except KcodecError:
        pass   # leaving the group is a courtesy; the session timeout does it too


def _print(args: argparse.Namespace, tp: Any, r: Any, many: bool, out: Any) -> None:
    if args.json:
        json_line({"topic": tp.topic, "partition": tp.partition, "offset": r.offset,
                   "timestamp": r.timestamp, "key": text(r.key), "value": text(r.value),
                   "headers": [[k, text(v)] for k, v in r.headers]}, out, flush=False)
        return
    where = f"{tp.topic}:{tp.partition}:{r.offset}" if many else f"{tp.partition}:{r.offset}"
    key = "" if r.key is None else f" key={show(r.key)}"
    hdrs = ""
    if r.headers:
        hdrs = " headers=[" + ", ".join(f"{show(k.encode() if isinstance(k, str) else k)}="
                                        f"{show(v)}" for k, v in r.headers) + "]"
    out.write(f"{where}{key}{hdrs} {show(r.value)}\n")
