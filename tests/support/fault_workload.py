"""The clients of the fault tests, each a process of its own that writes its history.

    python -m tests.support.fault_workload produce BOOTSTRAP TOPIC PARTITIONS HISTORY STOPFILE [RATE]
    python -m tests.support.fault_workload consume BOOTSTRAP TOPIC GROUP HISTORY STOPFILE [OPTIONS]
    python -m tests.support.fault_workload read BOOTSTRAP TOPIC PARTITIONS OUT
    python -m tests.support.fault_workload committed BOOTSTRAP TOPIC PARTITIONS GROUP OUT

History files are JSON lines, written as things happen (a member killed with SIGKILL
leaves what it did up to then), each with the wall time ``t``:

    produce    {"send": id, "p": partition}  then  {"ack": id, "p": p, "off": offset}
               or {"fail": id, "p": p, "err": text}; record i has value "i" and goes to
               partition i % PARTITIONS, at RATE records/s until STOPFILE exists
               (PARTITIONS "@FILE": the count in FILE, read again twice a second)
    consume    {"assigned": [p...]}, {"revoked": [p...]}, {"lost": [p...]},
               {"rec": id, "p": p, "off": offset}, {"commit": {p: offset}, "sent": time}
               (after the commit succeeded, ``sent`` when it was asked for; with "seen":
               the group's committed offsets as read back, for auto-commit), {"err": text}; polls until STOPFILE exists; OPTIONS
               (JSON): the client, group protocol, assignor and commit pattern (``consume``)
    read       {"p": p, "off": offset, "id": id} for every record in the log, then
               {"ends": {p: end offset}, "complete": whether it read up to them}
    committed  {"p": p, "off": committed offset or null}

The producer is idempotent with acks=all (the defaults); a member commits by its pattern
(``Member``; by default what it processed, once a second and before its partitions are
revoked).
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


def produce(bootstrap: str, topic: str, partitions: int | str, path: str, stop: str,
            rate: float = 200.0) -> None:
    h = History(path)
    count_file = partitions[1:] if isinstance(partitions, str) else None
    partitions = int(open(count_file).read()) if count_file else int(partitions)
    read_at = time.monotonic()
    with Producer(bootstrap_servers=bootstrap, linger_ms=5, delivery_timeout_ms=120000,
                  request_timeout_ms=10000, api_timeout_ms=60000,
                  metadata_max_age_ms=1000 if count_file else 300000) as p:
        i = 0
        start = time.monotonic()
        while not os.path.exists(stop):
            if count_file and time.monotonic() - read_at > 0.5:   # partitions added
                # the new ones once the producer's metadata has them (given a partition
                # it does not know yet, send raises)
                partitions = min(int(open(count_file).read()), len(p.partitions_for(topic)))
                read_at = time.monotonic()
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


class Member:
    """What every member does, whatever its client: log what it receives and commits, and
    commit by its pattern (``commit``): ``poll`` (synchronously after each poll with
    records), ``revoke`` (what it processed, in the revoke callback and once a second),
    ``async`` (asynchronously after each poll; logged when the broker said yes, with the
    commit's number in the order sent: a client may call back out of that order, as
    kafka-python does, while the broker applied them in it; after a failed one, what it
    processed of its partitions is committed again at the next second's tick, as an
    application answers a failed async commit: no client retries one, and the last
    records' commits, sent during the rebalances after a broker restart, were refused
    ILLEGAL_GENERATION with no record left to commit after) or ``auto`` (the client's
    auto-commit). With ``auto`` and ``async``, the group's committed offsets of the
    member's partitions are also read back once a second and logged as seen."""

    def __init__(self, h: History, commit: str) -> None:
        self.h, self.pattern = h, commit
        self.done: dict[int, int] = {}     # partition -> next offset processed, uncommitted
        self.owned: set[int] = set()
        self.last = time.monotonic()
        self.sent = 0                      # async commits sent
        self.sent_at: dict[int, float] = {}  # async commit number -> when it was sent
        self.async_failed = False          # an async commit failed: commit again at a tick

    # the client's own calls, given by each client below
    def commit_sync(self, offsets: dict[int, int]) -> None:
        raise NotImplementedError

    def commit_async(self, offsets: dict[int, int], seq: int) -> None:
        """Send; then ``async_done(offsets, error, seq)``."""
        raise NotImplementedError

    def committed(self, partitions: list[int]) -> dict[int, int | None]:
        raise NotImplementedError

    def _commit(self, offsets: dict[int, int], where: str) -> None:
        if not offsets:
            return
        sent = time.time()
        try:
            self.commit_sync(offsets)
        except Exception as exc:
            self.h.write(err=f"commit {where}: {type(exc).__name__}: {exc}"[:300])
        else:
            self.committed_ok(offsets, sent)

    def to_commit_on_revoke(self, parts: list[int]) -> dict[int, int]:
        """What the revoke callback commits (nothing but with the ``revoke`` pattern)."""
        if self.pattern != "revoke":
            return {}
        return {p: off for p, off in self.done.items() if p in parts}

    def committed_ok(self, offsets: dict[int, int], sent: float) -> None:
        """A synchronous commit of ``offsets``, called at ``sent``, succeeded."""
        self.h.write(commit={str(p): off for p, off in offsets.items()}, sent=sent)
        for p, off in offsets.items():
            if self.done.get(p) == off:
                del self.done[p]

    def revoked(self, parts: list[int], commit: bool = True) -> None:
        """The revoke callback (``commit=False``: the client committed already)."""
        if commit:
            self._commit(self.to_commit_on_revoke(parts), "on revoke")
        for p in parts:
            self.done.pop(p, None)
        self.owned.difference_update(parts)
        self.h.write(revoked=parts)

    def assigned(self, parts: list[int]) -> None:
        self.owned.update(parts)
        self.h.write(assigned=parts)

    def lost(self, parts: list[int]) -> None:
        for p in parts:
            self.done.pop(p, None)
        self.owned.difference_update(parts)
        self.h.write(lost=parts)

    def got(self, batch: dict[int, list[tuple[int, bytes]]]) -> None:
        """A poll's records: partition -> [(offset, value)]."""
        offsets = {}
        for p, recs in batch.items():
            for off, value in recs:
                self.h.write(rec=int(value), p=p, off=off)
            offsets[p] = self.done[p] = recs[-1][0] + 1
        if offsets and self.pattern == "poll":
            self._commit(offsets, "after poll")
        elif offsets and self.pattern == "async":
            self._commit_async(offsets)

    def _commit_async(self, offsets: dict[int, int]) -> None:
        try:
            self.sent += 1
            self.sent_at[self.sent] = time.time()
            self.commit_async(offsets, self.sent)
        except Exception as exc:
            self.h.write(err=f"commit async: {type(exc).__name__}: {exc}"[:300])

    def async_done(self, offsets: dict[int, int], err: Any, seq: int) -> None:
        sent = self.sent_at.pop(seq, None)
        if err is None:
            self.h.write(commit={str(p): off for p, off in offsets.items()}, seq=seq,
                         **({"sent": sent} if sent is not None else {}))
        else:
            self.async_failed = True
            self.h.write(err=f"commit async: {err}"[:300])

    def tick(self) -> None:
        if time.monotonic() - self.last < 1.0:
            return
        self.last = time.monotonic()
        if self.pattern == "async" and self.async_failed:
            self.async_failed = False
            again = {p: off for p, off in self.done.items() if p in self.owned}
            if again:
                self._commit_async(again)
        if self.pattern == "revoke":
            self._commit(dict(self.done), "each second")
        elif self.pattern in ("auto", "async") and self.owned:
            try:
                sent = time.time()
                seen = self.committed(sorted(self.owned))
                seen = {p: off for p, off in seen.items() if off is not None and off >= 0}
                if seen:
                    # seq: the async commits sent by then (the answers of earlier ones may
                    # come after this read, though the broker applied them before it)
                    self.h.write(commit={str(p): off for p, off in seen.items()}, seen=True,
                                 sent=sent,
                                 **({"seq": self.sent} if self.pattern == "async" else {}))
            except Exception as exc:
                self.h.write(err=f"committed: {type(exc).__name__}: {exc}"[:300])


def consume(bootstrap: str, topic: str, group: str, path: str, stop: str,
            options: str = "{}") -> None:
    """``options`` (JSON): client (kcodec, confluent, kafka-python), protocol (classic,
    consumer), assignor (classic: range, roundrobin, sticky, cooperative-sticky;
    consumer: uniform, range), commit (poll, revoke, async, auto). The member leaves
    the group (closes) when STOPFILE or HISTORY.leave exists."""
    opts = {"client": "kcodec", "protocol": "classic", "assignor": None, "commit": "revoke",
            **json.loads(options)}
    h = History(path)
    h.write(member=opts)
    run = {"kcodec": _kcodec, "confluent": _confluent, "kafka-python": _kafka_python}
    run[opts["client"]](bootstrap, topic, group, h, opts,
                        lambda: os.path.exists(stop) or os.path.exists(path + ".leave"))


def _kcodec(bootstrap: str, topic: str, group: str, h: History, opts: dict,
            stopped: Any) -> None:
    kw: dict[str, Any] = dict(
        bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=opts["commit"] == "auto", auto_commit_interval_ms=500,
        session_timeout_ms=6000, heartbeat_interval_ms=500, api_timeout_ms=20000,
        request_timeout_ms=10000, max_poll_records=200, metadata_max_age_ms=2000,
        group_protocol=opts["protocol"])
    if opts["assignor"] and opts["protocol"] == "classic":
        kw["partition_assignment_strategy"] = opts["assignor"]
    elif opts["assignor"]:
        kw["group_remote_assignor"] = opts["assignor"]
    with Consumer(**kw) as c:
        m = Member(h, opts["commit"])
        m.commit_sync = lambda offs: c.commit({TopicPartition(topic, p): o
                                               for p, o in offs.items()})
        m.commit_async = lambda offs, seq: c.commit_async(
            {TopicPartition(topic, p): o for p, o in offs.items()},
            callback=lambda err, offs=offs: m.async_done(offs, err, seq))
        m.committed = lambda ps: {tp.partition: off for tp, off in c.committed(
            [TopicPartition(topic, p) for p in ps]).items()}

        class L(RebalanceListener):
            def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
                m.revoked(sorted(tp.partition for tp in revoked))

            def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
                m.assigned(sorted(tp.partition for tp in assigned))

            def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
                m.lost(sorted(tp.partition for tp in lost))
        c.subscribe([topic], listener=L())
        while not stopped():
            try:
                got = c.poll(0.5)
            except Exception as exc:   # reported, and polling goes on (as an application does)
                h.write(err=f"poll: {type(exc).__name__}: {exc}"[:300])
                continue
            m.got({tp.partition: [(r.offset, r.value) for r in recs]
                   for tp, recs in got.items() if recs})
            m.tick()


def _confluent(bootstrap: str, topic: str, group: str, h: History, opts: dict,
               stopped: Any) -> None:
    import confluent_kafka as ck

    m = Member(h, opts["commit"])
    sent: list[int] = []     # async commits in the order sent (librdkafka answers in it)
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": opts["commit"] == "auto", "auto.commit.interval.ms": 500,
        "topic.metadata.refresh.interval.ms": 2000,
        "on_commit": lambda err, tps: m.async_done(
            {tp.partition: tp.offset for tp in tps if tp.error is None}, err,
            sent.pop(0) if sent else -1)
        if opts["commit"] == "async" else None}
    if opts["protocol"] == "consumer":
        conf["group.protocol"] = "consumer"
        if opts["assignor"]:
            conf["group.remote.assignor"] = opts["assignor"]
    else:
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        if opts["assignor"]:
            conf["partition.assignment.strategy"] = opts["assignor"]
    if conf["on_commit"] is None:
        del conf["on_commit"]
    c = ck.Consumer(conf)

    def tps(offs: dict[int, int]) -> list:
        return [ck.TopicPartition(topic, p, o) for p, o in offs.items()]
    m.commit_sync = lambda offs: c.commit(offsets=tps(offs), asynchronous=False)
    m.commit_async = lambda offs, seq: (sent.append(seq),
                                        c.commit(offsets=tps(offs), asynchronous=True))
    m.committed = lambda ps: {tp.partition: tp.offset for tp in c.committed(
        [ck.TopicPartition(topic, p) for p in ps], timeout=10)}
    c.subscribe([topic],
                on_assign=lambda _c, ps: m.assigned(sorted(tp.partition for tp in ps)),
                on_revoke=lambda _c, ps: m.revoked(sorted(tp.partition for tp in ps)),
                on_lost=lambda _c, ps: m.lost(sorted(tp.partition for tp in ps)))
    try:
        while not stopped():
            msgs = c.consume(200, 0.5)
            batch: dict[int, list[tuple[int, bytes]]] = {}
            for msg in msgs:
                if msg.error():
                    h.write(err=f"poll: {msg.error()}"[:300])
                    continue
                batch.setdefault(msg.partition(), []).append((msg.offset(), msg.value()))
            m.got(batch)
            m.tick()
    finally:
        c.close()


def _kafka_python(bootstrap: str, topic: str, group: str, h: History, opts: dict,
                  stopped: Any) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    from kafka.consumer.subscription_state import AsyncConsumerRebalanceListener
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.structs import OffsetAndMetadata

    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                 "sticky": StickyPartitionAssignor}
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                      auto_offset_reset="earliest",
                      enable_auto_commit=opts["commit"] == "auto", auto_commit_interval_ms=500,
                      session_timeout_ms=6000, heartbeat_interval_ms=500,
                      metadata_max_age_ms=2000, max_poll_records=200,
                      partition_assignment_strategy=[assignors[opts["assignor"] or "range"]])
    m = Member(h, opts["commit"])

    def kw(offs: dict[int, int]) -> dict:
        return {KTP(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offs.items()}
    m.commit_sync = lambda offs: c.commit(kw(offs))
    m.commit_async = lambda offs, seq: c.commit_async(
        kw(offs), callback=lambda _o, resp, offs=offs: m.async_done(
            offs, None if not isinstance(resp, Exception) else resp, seq))
    m.committed = lambda ps: {p: c.committed(KTP(topic, p)) for p in ps}

    # kafka-python 3 calls the rebalance listener on its IO thread, where a blocking call
    # (commit, committed) raises "Cannot block on net.run() from the IO thread itself":
    # the listener is its async kind and awaits the coroutines kafka-python's own
    # pre-rebalance commit and committed-offset fetch use.
    coordinator = c._coordinator

    class L(AsyncConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked: Any) -> None:
            parts = sorted(tp.partition for tp in revoked)
            offs = m.to_commit_on_revoke(parts)
            if offs:
                sent = time.time()
                try:
                    await coordinator._commit_offsets_sync_async(kw(offs))
                except Exception as exc:
                    h.write(err=f"commit on revoke: {type(exc).__name__}: {exc}"[:300])
                else:
                    m.committed_ok(offs, sent)
            m.revoked(parts, commit=False)

        async def on_partitions_assigned(self, assigned: Any) -> None:
            # kafka-python 3.0 keeps the position of a partition it is given again after
            # an eager rebalance (Java's consumer drops every position when it revokes all
            # partitions), even when another member owned and committed it meanwhile: it
            # would deliver again from its old position, below the group's committed
            # offset. Each assigned partition starts from the committed offset, as Java's.
            tps = sorted(assigned)
            try:
                got = await coordinator.fetch_committed_offsets_async(set(tps))
                for tp in tps:
                    om = got.get(tp)
                    if om is not None and om.offset is not None and om.offset >= 0:
                        c.seek(tp, om.offset)
            except Exception as exc:
                h.write(err=f"committed on assign: {type(exc).__name__}: {exc}"[:300])
            m.assigned(sorted(tp.partition for tp in tps))

        async def on_partitions_lost(self, lost: Any) -> None:
            m.lost(sorted(tp.partition for tp in lost))
    c.subscribe([topic], listener=L())
    try:
        while not stopped():
            try:
                got = c.poll(timeout_ms=500)
            except Exception as exc:
                h.write(err=f"poll: {type(exc).__name__}: {exc}"[:300])
                continue
            m.got({tp.partition: [(r.offset, r.value) for r in recs]
                   for tp, recs in got.items() if recs})
            m.tick()
    finally:
        c.close()


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
        produce(args[0], args[1], args[2] if args[2].startswith("@") else int(args[2]),
                args[3], args[4], float(args[5]) if len(args) > 5 else 200.0)
    elif role == "consume":
        consume(*args[:6])
    elif role == "read":
        read(args[0], args[1], int(args[2]), args[3])
    elif role == "committed":
        committed(args[0], args[1], int(args[2]), args[3], args[4])
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
