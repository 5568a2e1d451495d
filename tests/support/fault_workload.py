"""The clients of the fault tests, each a process of its own that writes its history.

    python -m tests.support.fault_workload produce BOOTSTRAP TOPIC PARTITIONS HISTORY STOPFILE [RATE]
    python -m tests.support.fault_workload consume BOOTSTRAP TOPIC GROUP HISTORY STOPFILE
    python -m tests.support.fault_workload read BOOTSTRAP TOPIC PARTITIONS OUT
    python -m tests.support.fault_workload committed BOOTSTRAP TOPIC PARTITIONS GROUP OUT

History files are JSON lines, written as things happen (a member killed with SIGKILL
leaves what it did up to then), each with the wall time ``t``:

    produce    {"send": id, "p": partition}  then  {"ack": id, "p": p, "off": offset}
               or {"fail": id, "p": p, "err": text}; record i has value "i" and goes to
               partition i % PARTITIONS, at RATE records/s until STOPFILE exists
    consume    {"assigned": [p...]}, {"revoked": [p...]}, {"lost": [p...]},
               {"rec": id, "p": p, "off": offset}, {"commit": {p: offset}} (after the
               commit succeeded), {"err": text}; polls until STOPFILE exists
    read       {"p": p, "off": offset, "id": id} for every record in the log, then
               {"ends": {p: end offset}, "complete": whether it read up to them}
    committed  {"p": p, "off": committed offset or null}

The producer is idempotent with acks=all (the defaults); a member commits synchronously
after each poll that returned records, and its listener commits what it processed
before its partitions are revoked.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from typing import Any

from kcodec.client import Consumer, Producer, RebalanceListener, TopicPartition


class History:
    def __init__(self, path: str) -> None:
        self.f = open(path, "a", buffering=1)
        self.lock = threading.Lock()

    def write(self, **event: Any) -> None:
        event["t"] = time.time()
        with self.lock:
            self.f.write(json.dumps(event) + "\n")


def produce(bootstrap: str, topic: str, partitions: int, path: str, stop: str,
            rate: float = 200.0) -> None:
    h = History(path)
    with Producer(bootstrap_servers=bootstrap, linger_ms=5, delivery_timeout_ms=120000,
                  request_timeout_ms=10000, api_timeout_ms=60000) as p:
        i = 0
        start = time.monotonic()
        while not os.path.exists(stop):
            part = i % partitions
            h.write(send=i, p=part)
            fut = p.send(topic, b"%d" % i, partition=part)

            def done(err: Any, res: Any, i: int = i, part: int = part) -> None:
                if err is None:
                    h.write(ack=i, p=part, off=res.offset)
                else:
                    h.write(fail=i, p=part, err=str(err)[:300])
            fut.add_callback(done)
            i += 1
            ahead = start + i / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        p.flush(120)


class _Listener(RebalanceListener):
    def __init__(self, c: Consumer, h: History, done: dict[int, int]) -> None:
        self.c, self.h, self.done = c, h, done

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        mine = {tp: off for tp, off in ((TopicPartition(*k), v) for k, v in self.done.items())
                if tp in revoked}
        if mine:
            try:
                self.c.commit(mine)
                self.h.write(commit={str(tp.partition): off for tp, off in mine.items()})
            except Exception as exc:
                self.h.write(err=f"commit on revoke: {exc}"[:300])
        self.h.write(revoked=[tp.partition for tp in revoked])

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.done.clear()
        self.h.write(assigned=[tp.partition for tp in assigned])

    def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        self.h.write(lost=[tp.partition for tp in lost])


def consume(bootstrap: str, topic: str, group: str, path: str, stop: str) -> None:
    h = History(path)
    done: dict[Any, int] = {}      # partition -> next offset processed, not yet committed
    with Consumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                  auto_offset_reset="earliest", session_timeout_ms=10000,
                  heartbeat_interval_ms=1000, api_timeout_ms=20000, request_timeout_ms=10000,
                  max_poll_records=200) as c:
        c.subscribe([topic], listener=_Listener(c, h, done))
        while not os.path.exists(stop):
            try:
                got = c.poll(0.5)
            except Exception as exc:   # reported, and polling goes on (as an application does)
                h.write(err=f"poll: {type(exc).__name__}: {exc}"[:300])
                continue
            if not got:
                continue
            offsets = {}
            for tp, recs in got.items():
                for r in recs:
                    h.write(rec=int(r.value), p=tp.partition, off=r.offset)
                offsets[tp] = recs[-1].offset + 1
                done[tuple(tp)] = recs[-1].offset + 1
            try:
                c.commit(offsets)
                h.write(commit={str(tp.partition): off for tp, off in offsets.items()})
                for tp in offsets:
                    done.pop(tuple(tp), None)
            except Exception as exc:
                h.write(err=f"commit: {type(exc).__name__}: {exc}"[:300])


def read(bootstrap: str, topic: str, partitions: int, path: str) -> None:
    h = History(path)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                  fetch_max_wait_ms=100, api_timeout_ms=60000) as c:
        c.assign(tps)
        c.seek_to_end(*tps)
        ends = {tp: c.position(tp) for tp in tps}
        c.seek_to_beginning(*tps)
        deadline = time.monotonic() + 120
        while any(c.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for tp, recs in c.poll(1.0).items():
                for r in recs:
                    h.f.write(json.dumps({"p": tp.partition, "off": r.offset,
                                          "id": int(r.value)}) + "\n")
        complete = all(c.position(tp) >= ends[tp] for tp in tps)
        h.f.write(json.dumps({"ends": {str(tp.partition): o for tp, o in ends.items()},
                              "complete": complete}) + "\n")


def committed(bootstrap: str, topic: str, partitions: int, group: str, path: str) -> None:
    h = History(path)
    with Consumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                  api_timeout_ms=60000) as c:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)])
    for tp, off in sorted(got.items()):
        h.f.write(json.dumps({"p": tp.partition, "off": off}) + "\n")


def main(argv: list[str]) -> None:
    # the client's warnings go to the run's clients.err, next to the histories
    logging.basicConfig(level=logging.WARNING,
                        format=f"%(asctime)s {argv[0]} %(name)s %(levelname)s %(message)s")
    role, args = argv[0], argv[1:]
    if role == "produce":
        produce(args[0], args[1], int(args[2]), args[3], args[4],
                float(args[5]) if len(args) > 5 else 200.0)
    elif role == "consume":
        consume(*args[:5])
    elif role == "read":
        read(args[0], args[1], int(args[2]), args[3])
    elif role == "committed":
        committed(args[0], args[1], int(args[2]), args[3], args[4])
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
