"""``kcodec transactions list|describe|abort|commit``: transactions seen and ended from
outside their producer, for instance the prepared (two-phase-commit) transactions a stopped
application left open, which hold back every read_committed reader of their partitions."""

from __future__ import annotations

import argparse
import time

from kcodec.cli._client import (
    UsageError,
    add_connection,
    client_config,
    guarded,
    json_line,
    table,
    which_one,
)

NAME = "transactions"
HELP = "list, describe, abort or commit transactions (ListTransactions, DescribeTransactions)"
EXAMPLES = [
    "kcodec transactions list --state Ongoing --older-than 600",
    "kcodec transactions describe orders-tx",
    "kcodec transactions abort orders-tx",
    "kcodec transactions commit orders-tx --prepared 4001:7",
]
ACTIONS = {
    "list": "the transactional ids the brokers coordinate, with producer id and state",
    "describe": "each transaction's state, producer, timeout, start and partitions",
    "abort": "abort the open or prepared transaction of an id and fence its producer",
    "commit": "commit a prepared (two-phase-commit) transaction whose state you recorded",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    p = sub.add_parser("list", help=ACTIONS["list"], description=ACTIONS["list"])
    p.add_argument("--state", action="append", default=[], metavar="STATE",
                   help="only this state (Empty, Ongoing, PrepareCommit, PrepareAbort, "
                        "CompleteCommit, CompleteAbort); may be repeated")
    p.add_argument("--producer-id", action="append", type=int, default=[], metavar="ID",
                   help="only this producer id; may be repeated")
    p.add_argument("--pattern", metavar="REGEX",
                   help="only ids that match this regular expression as a whole")
    p.add_argument("--older-than", type=float, metavar="SECONDS",
                   help="only transactions open longer than this")
    add_connection(p)
    p = sub.add_parser("describe", help=ACTIONS["describe"], description=ACTIONS["describe"])
    p.add_argument("ids", nargs="+", metavar="TRANSACTIONAL_ID")
    add_connection(p)
    p = sub.add_parser("abort", help=ACTIONS["abort"], description=ACTIONS["abort"] + ": "
                       "its records are never shown to read_committed readers; a producer "
                       "that still runs under the id gets ProducerFencedError")
    p.add_argument("ids", nargs="+", metavar="TRANSACTIONAL_ID")
    add_connection(p)
    p = sub.add_parser("commit", help=ACTIONS["commit"], description=ACTIONS["commit"] + ": "
                       "committed if --prepared is the state the coordinator holds, else "
                       "aborted (exit code 1)")
    p.add_argument("id", metavar="TRANSACTIONAL_ID")
    p.add_argument("--prepared", required=True, metavar="PRODUCER_ID:EPOCH",
                   help="the state prepare_transaction returned, as recorded at prepare time")
    add_connection(p)


def _ms(ms: int) -> str:
    if ms < 0:
        return "-"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


@guarded
def run(args: argparse.Namespace) -> int:
    from kcodec.client import Admin
    from kcodec.client.producer.transactions import PreparedTxnState

    if args.action is None:
        return which_one(args.command, ACTIONS)
    prepared = None
    if args.action == "commit":
        prepared = PreparedTxnState.parse(args.prepared)
        if prepared.producer_id < 0:
            raise UsageError("--prepared must name a producer id and epoch (ID:EPOCH)")
    if args.action == "list" and args.older_than is not None and args.older_than < 0:
        raise UsageError(f"--older-than must be at least 0, got {args.older_than}")
    with Admin(**client_config(args)) as admin:
        if args.action == "list":
            older = -1 if args.older_than is None else int(args.older_than * 1000)
            rows = admin.list_transactions(args.state, args.producer_id, older, args.pattern)
            if args.json:
                for r in rows:
                    json_line({"transactional_id": r.transactional_id,
                               "producer_id": r.producer_id, "state": r.state})
            else:
                table(["transactional id", "producer id", "state"],
                      [(r.transactional_id, r.producer_id, r.state) for r in rows])
            return 0
        if args.action == "describe":
            descs = admin.describe_transactions(args.ids)
            if args.json:
                for d in descs:
                    json_line({"transactional_id": d.transactional_id, "state": d.state,
                               "producer_id": d.producer_id, "producer_epoch": d.producer_epoch,
                               "timeout_ms": d.timeout_ms, "start_time_ms": d.start_time_ms,
                               "two_phase": d.two_phase, "coordinator": d.coordinator,
                               "partitions": [[t, p] for t, p in d.partitions]})
            else:
                table(["transactional id", "state", "producer", "timeout", "started",
                       "partitions"],
                      [(d.transactional_id, d.state, f"{d.producer_id}:{d.producer_epoch}",
                        "two-phase" if d.two_phase else f"{d.timeout_ms} ms",
                        _ms(d.start_time_ms) if d.state == "Ongoing" else "-",
                        ",".join(f"{t}-{p}" for t, p in d.partitions) or "-")
                       for d in descs])
            return 0
        if args.action == "abort":
            for tid in args.ids:
                admin.force_terminate_transaction(tid)
                if args.json:
                    json_line({"transactional_id": tid, "result": "aborted"})
                else:
                    print(f"{tid}: aborted (its producer is fenced)")
            return 0
        ok = admin.complete_prepared_transaction(args.id, prepared or args.prepared)
        result = "committed" if ok else "not committed"
        if args.json:
            json_line({"transactional_id": args.id, "result": result})
        elif ok:
            print(f"{args.id}: committed")
        else:
            print(f"{args.id}: not committed: no transaction is open under this id, or it "
                  f"was not written as {prepared} (then it was aborted)")
        return 0 if ok else 1
