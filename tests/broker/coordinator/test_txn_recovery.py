"""Transactions and idempotence across a broker restart: ``kcodec broker --data-dir`` is
killed with SIGKILL while a transaction is open and started again on the same port. The
coordinator's state (transaction_state.jsonl) and each partition's producers and open
transactions (rebuilt from the log) come back: the last stable offset still holds back the
open transaction, read_committed consumers (kcodec's and confluent-kafka's) see exactly the
committed records, and the producer goes on and commits, or a new instance fences it, or the
coordinator aborts it when its timeout is up. Duplicate and out-of-order detection survive
too, and a decision half written into the partitions is finished on restart."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from kcodec.broker import Cluster
from kcodec.client import Admin, Producer, ProducerFencedError
from kcodec.protocol import EndTxnRequest, ErrorCode, InitProducerIdRequest, ListOffsetsRequest
from kcodec.records import iter_batches
from kcodec.testing.net import free_port
from tests.broker.apis.test_apis import batch, fetch, produce, values
from tests.support.broker_raw import Raw
from tests.support.txn_util import FAST, confluent_read, kcodec_read

pytestmark = [pytest.mark.broker]
E = ErrorCode


class BrokerProcess:
    """``kcodec broker`` on a data dir and a fixed free port; SIGKILL and start again."""

    def __init__(self, data_dir: os.PathLike) -> None:
        self.data_dir = str(data_dir)
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.started: dict = {}       # the broker's JSON line

    def start(self) -> BrokerProcess:
        for _ in range(50):     # the port may linger a moment after a kill
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kcodec", "broker", "--data-dir", self.data_dir,
                 "--port", str(self.port), "--json"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            line = self.proc.stdout.readline()
            if line:
                self.started = json.loads(line)
                assert self.started["bootstrap"] == self.bootstrap
                return self
            err = self.proc.stderr.read()
            self.proc.wait()
            if "in use" not in err:
                raise AssertionError(f"the broker did not start: {err}")
            time.sleep(0.2)
        raise AssertionError("the broker's port stayed busy")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.proc.stdout.close()
        self.proc.stderr.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None:
            self.proc.stdout.close()
            self.proc.stderr.close()


@pytest.fixture
def broker(tmp_path):
    b = BrokerProcess(tmp_path).start()
    yield b
    b.stop()


def _topic(bootstrap: str, partitions: int = 2) -> str:
    name = f"r-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers=bootstrap, **FAST) as admin:
        admin.create_topics([name], num_partitions=partitions)
    return name


def _offsets(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """(last stable offset, high watermark) from ListOffsets LATEST at both isolations."""
    L = ListOffsetsRequest
    out = []
    with Raw(bootstrap) as raw:
        for isolation in (1, 0):
            r = raw.call(L(replica_id=-1, isolation_level=isolation, topics=[L.ListOffsetsTopic(
                name=topic, partitions=[L.ListOffsetsPartition(partition_index=partition,
                                                               timestamp=-1)])]), 5)
            p = r.topics[0].partitions[0]
            assert p.error_code == 0
            out.append(p.offset)
    return out[0], out[1]


def _open_transaction(bootstrap: str, topic: str, tid: str, **conf) -> Producer:
    """A producer with one committed transaction (c0..c3 over both partitions) and one open
    (o0..o3, flushed into the log)."""
    p = Producer(bootstrap_servers=bootstrap, transactional_id=tid, **FAST, **conf)
    p.init_transactions()
    p.begin_transaction()
    for i in range(4):
        p.send(topic, f"c{i}".encode(), partition=i % 2)
    p.commit_transaction()
    p.begin_transaction()
    for i in range(4):
        p.send(topic, f"o{i}".encode(), partition=i % 2)
    p.flush()
    return p


def test_open_transaction_survives_sigkill_and_its_producer_commits_it(broker):
    topic = _topic(broker.bootstrap)
    p = _open_transaction(broker.bootstrap, topic, f"resume-{topic}")
    try:
        before = [_offsets(broker.bootstrap, topic, i) for i in (0, 1)]
        # c-records + their COMMIT marker are stable; the open o-records are not
        assert before == [(3, 5), (3, 5)]
        assert broker.started["unclean_restart"] is False
        broker.kill9()
        broker.start()
        # the broker says the data dir was left by a kill, with one transaction open
        assert (broker.started["unclean_restart"], broker.started["open_transactions"]) == (True, 1)
        assert [_offsets(broker.bootstrap, topic, i) for i in (0, 1)] == before
        committed = sorted([b"c0", b"c1", b"c2", b"c3"])
        assert sorted(kcodec_read(broker.bootstrap, topic, "read_committed", 4, 2)) == committed
        assert sorted(confluent_read(broker.bootstrap, topic, 4, 2)) == committed
        # the same producer goes on: more records, then the commit
        p.send(topic, b"late", partition=0)
        p.commit_transaction()
    finally:
        p.close(5)
    want = sorted([b"c0", b"c1", b"c2", b"c3", b"o0", b"o1", b"o2", b"o3", b"late"])
    assert sorted(kcodec_read(broker.bootstrap, topic, "read_committed", 9, 2)) == want
    assert sorted(confluent_read(broker.bootstrap, topic, 9, 2)) == want
    assert _offsets(broker.bootstrap, topic, 0) == (7, 7)    # ... o0 o2 late COMMIT


@pytest.mark.peers
def test_after_sigkill_a_new_instance_fences_the_old_producer_and_aborts_its_transaction(broker):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = _topic(broker.bootstrap)
    tid = f"fence-{topic}"
    old = _open_transaction(broker.bootstrap, topic, tid)
    try:
        broker.kill9()
        broker.start()
        new = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap,
                                        "transactional.id": tid})
        new.init_transactions(20)       # aborts the recovered open transaction, bumps the epoch
        new.begin_transaction()
        new.produce(topic, b"new", partition=1)
        new.commit_transaction(20)
        del new                         # librdkafka's producer is destroyed with the object
        with pytest.raises(ProducerFencedError):
            old.commit_transaction()
    finally:
        old.close(0)
    want = sorted([b"c0", b"c1", b"c2", b"c3", b"new"])
    assert sorted(kcodec_read(broker.bootstrap, topic, "read_committed", 5, 2)) == want
    assert sorted(confluent_read(broker.bootstrap, topic, 5, 2)) == want
    everything = kcodec_read(broker.bootstrap, topic, "read_uncommitted", 9, 2)
    assert sorted(everything) == sorted(want + [b"o0", b"o1", b"o2", b"o3"])
    lso0, hw0 = _offsets(broker.bootstrap, topic, 0)
    assert lso0 == hw0 == 6      # c0 c2 COMMIT o0 o2 ABORT


@pytest.mark.slow
def test_after_sigkill_an_open_transaction_is_aborted_when_its_timeout_is_up(broker):
    topic = _topic(broker.bootstrap)
    p = _open_transaction(broker.bootstrap, topic, f"timeout-{topic}",
                          transaction_timeout_ms=4000)
    try:
        broker.kill9()
        broker.start()
        # still held back right after the restart (the timer counts from the begin) ...
        assert _offsets(broker.bootstrap, topic, 0)[0] == 3
        deadline = time.monotonic() + 15
        while _offsets(broker.bootstrap, topic, 0) != (6, 6) and time.monotonic() < deadline:
            time.sleep(0.2)
        # ... then the coordinator writes ABORT into both partitions and bumps the epoch
        assert [_offsets(broker.bootstrap, topic, i) for i in (0, 1)] == [(6, 6), (6, 6)]
        with pytest.raises(ProducerFencedError):
            p.commit_transaction()
    finally:
        p.close(0)
    committed = sorted([b"c0", b"c1", b"c2", b"c3"])
    assert sorted(kcodec_read(broker.bootstrap, topic, "read_committed", 4, 2)) == committed
    assert sorted(confluent_read(broker.bootstrap, topic, 4, 2)) == committed


def test_idempotent_producer_state_is_rebuilt_from_the_log(broker):
    """Duplicates of batches written before the kill are recognised after it (with their
    original offset), a gap is out of order, and the old epoch of a bumped id is fenced."""
    topic = _topic(broker.bootstrap, 1)
    with Raw(broker.bootstrap) as raw:
        ip = raw.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4)
        pid, ep = ip.producer_id, ip.producer_epoch
        assert produce(raw, topic, 0, batch([b"a", b"b"], pid=pid, epoch=ep, seq=0)).base_offset == 0
        assert produce(raw, topic, 0, batch([b"c"], pid=pid, epoch=ep, seq=2)).base_offset == 2
        bumped = raw.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                                producer_id=pid, producer_epoch=ep), 4)
        assert (bumped.producer_id, bumped.producer_epoch) == (pid, ep + 1)
        assert produce(raw, topic, 0, batch([b"d"], pid=pid, epoch=ep + 1, seq=0)).base_offset == 3
    broker.kill9()
    broker.start()
    with Raw(broker.bootstrap) as raw:
        dup = produce(raw, topic, 0, batch([b"d"], pid=pid, epoch=ep + 1, seq=0))
        assert (dup.error_code, dup.base_offset) == (0, 3)   # a retry: NONE, the original offset
        gap = produce(raw, topic, 0, batch([b"e"], pid=pid, epoch=ep + 1, seq=5))
        assert gap.error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
        stale = produce(raw, topic, 0, batch([b"z"], pid=pid, epoch=ep, seq=3))
        assert stale.error_code in (E.INVALID_PRODUCER_EPOCH, E.PRODUCER_FENCED)
        assert produce(raw, topic, 0, batch([b"e"], pid=pid, epoch=ep + 1, seq=1)).base_offset == 4
        assert values(fetch(raw, topic, 0, 0).responses[0].partitions[0].records) == \
            [b"a", b"b", b"c", b"d", b"e"]
        # a bump naming the old epoch is refused: the newest epoch came back from the log
        again = raw.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                               producer_id=pid, producer_epoch=ep), 4)
        assert again.producer_id != pid or again.producer_epoch != ep + 1


# ---------------------------------------------------------------- in process, step by step
def _markers(cluster: Cluster, topic: str, partition: int) -> list[tuple[int, int]]:
    """(offset, control type) of every control batch of the partition."""
    log = cluster.state.partition(topic, partition).log
    out = []
    for b in iter_batches(log.read(0, 1 << 20)):
        if b.is_control:
            out += [(b.base_offset, r.control_type) for r in b]
    return out


def test_a_commit_decided_but_half_written_is_finished_on_restart(tmp_path):
    """The broker stops after the PrepareCommit state and the first partition's marker: on
    restart the second partition gets its marker (the first no second one), the offsets
    sent in the transaction reach the group, and the producer's retried EndTxn succeeds."""
    from kcodec.broker.coordinator.txn import write_marker

    topic, tid = "half", "half-tx"
    with Cluster(data_dir=tmp_path) as c:
        c.create_topic(topic, partitions=2)
        p = Producer(bootstrap_servers=c.bootstrap, transactional_id=tid, **FAST)
        try:
            p.init_transactions()
            p.begin_transaction()
            p.send(topic, b"p0", partition=0)
            p.send(topic, b"p1", partition=1)
            p.send_offsets_to_transaction({(topic, 0): 7}, "half-group")
            p.flush()
            t = c.txns.txns[tid]
            pid, epoch = t.producer_id, t.epoch
            with c.txns.lock:      # what _complete does, stopped after the first marker
                t.state = "PrepareCommit"
                c.txns._save(t)
                assert write_marker(c, topic, 0, pid, epoch, True) == 0
        finally:
            p.close(0)
        assert _markers(c, topic, 0) == [(1, 1)] and _markers(c, topic, 1) == []
    with Cluster(data_dir=tmp_path) as c:
        assert _markers(c, topic, 0) == [(1, 1)] and _markers(c, topic, 1) == [(1, 1)]
        assert c.txns.txns[tid].state == "CompleteCommit"
        assert sorted(kcodec_read(c.bootstrap, topic, "read_committed", 2, 2)) == [b"p0", b"p1"]
        with Admin(bootstrap_servers=c.bootstrap, **FAST) as admin:
            offs = admin.committed_offsets("half-group", [topic])
        assert {(tp.topic, tp.partition): o for tp, o in offs.items()} == {(topic, 0): 7}
        with Raw(c.bootstrap) as raw:      # the producer's EndTxn, retried after the restart
            r = raw.call(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                       committed=True), 3)
            assert r.error_code == 0
    with Cluster(data_dir=tmp_path) as c:  # and nothing more is written on a third start
        assert _markers(c, topic, 1) == [(1, 1)]


def test_an_abort_marker_missing_from_the_index_is_indexed_on_restart(tmp_path):
    topic = "idx"
    with Cluster(data_dir=tmp_path) as c:
        c.create_topic(topic, partitions=1)
        with Producer(bootstrap_servers=c.bootstrap, transactional_id="i", **FAST) as p:
            p.init_transactions()
            p.begin_transaction()
            p.send(topic, b"gone", partition=0)
            p.flush()
            p.abort_transaction()
            p.begin_transaction()
            p.send(topic, b"kept", partition=0)
            p.commit_transaction()
    (idx,) = (tmp_path / "logs" / f"{topic}-0").glob("*.txnindex")
    idx.unlink()      # as if killed between the ABORT marker and its index entry,
    (tmp_path / "producer_snapshot.json").unlink()     # so without a clean stop's snapshot
    with Cluster(data_dir=tmp_path) as c:
        assert kcodec_read(c.bootstrap, topic, "read_committed", 1) == [b"kept"]
        assert confluent_read(c.bootstrap, topic, 1) == [b"kept"]
    assert idx.stat().st_size == 34


# ---------------------------------------------------------------- snapshots and the state log
def _idempotent(raw: Raw) -> tuple[int, int]:
    ip = raw.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4)
    return ip.producer_id, ip.producer_epoch


def test_a_clean_stop_writes_a_snapshot_the_next_start_reads_instead_of_the_log(tmp_path):
    with Cluster(data_dir=tmp_path) as c:
        c.create_topic("s", partitions=1)
        with Raw(c.bootstrap) as raw:
            pid, ep = _idempotent(raw)
            for i in range(30):
                assert produce(raw, "s", 0, batch([b"%d" % i], pid=pid, epoch=ep, seq=i)).error_code == 0
        p = Producer(bootstrap_servers=c.bootstrap, transactional_id="snap", **FAST)
        p.init_transactions()
        p.begin_transaction()
        p.send("s", b"open", partition=0)
        p.flush()
        p.close(0)
    assert (tmp_path / "producer_snapshot.json").exists()
    with Cluster(data_dir=tmp_path) as c:
        assert c.txns.recovered == {"partitions": 1, "from_snapshot": 1, "batches_read": 0}
        assert not (tmp_path / "producer_snapshot.json").exists()     # used once
        with Raw(c.bootstrap) as raw:
            dup = produce(raw, "s", 0, batch([b"29"], pid=pid, epoch=ep, seq=29))
            assert (dup.error_code, dup.base_offset) == (0, 29)   # a retry: NONE, the original offset
            assert produce(raw, "s", 0, batch([b"x"], pid=pid, epoch=ep, seq=31)).error_code == \
                E.OUT_OF_ORDER_SEQUENCE_NUMBER
            assert _offsets(c.bootstrap, "s", 0) == (30, 31)          # the open one holds
            assert produce(raw, "s", 0, batch([b"30"], pid=pid, epoch=ep, seq=30)).base_offset == 31
    with Cluster(data_dir=tmp_path) as c:                 # the second clean stop's snapshot
        assert c.txns.recovered == {"partitions": 1, "from_snapshot": 1, "batches_read": 0}


@pytest.mark.parametrize("damage", ["offset past the log end", "topic recreated", "garbage"])
def test_a_snapshot_that_does_not_fit_the_log_is_ignored(tmp_path, damage):
    with Cluster(data_dir=tmp_path) as c:
        c.create_topic("s", partitions=1)
        with Raw(c.bootstrap) as raw:
            pid, ep = _idempotent(raw)
            for i in range(3):
                assert produce(raw, "s", 0, batch([b"%d" % i], pid=pid, epoch=ep, seq=i)).error_code == 0
    path = tmp_path / "producer_snapshot.json"
    snap = json.loads(path.read_text())
    entry = snap["partitions"]["s/0"]
    entry["producers"] = {}        # a wrong table: it must not be used
    if damage == "offset past the log end":
        entry["offset"] = 1000
    elif damage == "topic recreated":
        entry["topic_id"] = str(uuid.uuid4())
    else:
        entry["producers"] = "nonsense"
    path.write_text(json.dumps(snap))
    with Cluster(data_dir=tmp_path) as c:
        assert c.txns.recovered == {"partitions": 1, "from_snapshot": 0, "batches_read": 3}
        with Raw(c.bootstrap) as raw:
            dup = produce(raw, "s", 0, batch([b"2"], pid=pid, epoch=ep, seq=2))
            assert (dup.error_code, dup.base_offset) == (0, 2)   # a retry: NONE, the original offset


def test_the_transaction_state_log_is_compacted(tmp_path):
    from kcodec.broker.coordinator.txn_log import FILE, TxnStateLog

    log = TxnStateLog(str(tmp_path))
    assert log.load() == {}
    for i in range(25_000):
        log.write({"id": f"tx-{i % 3}", "n": i})
    lines = (tmp_path / FILE).read_text().splitlines()
    assert len(lines) <= 10_001
    log.close()
    log = TxnStateLog(str(tmp_path))
    assert {k: v["n"] for k, v in log.load().items()} == {"tx-0": 24999, "tx-1": 24997, "tx-2": 24998}
    log.close()
    assert len((tmp_path / FILE).read_text().splitlines()) == 3


@pytest.mark.slow
def test_consume_transform_produce_with_the_broker_killed_at_random_points(broker):
    """A consume-transform-produce loop (one transaction per poll: records and consumed
    offsets) whose broker is killed with SIGKILL and restarted at random points: records sent
    but not flushed, flushed but not committed, offsets added, just committed. The same
    producer goes on after a restart when it can; a round that fails starts over with a new
    producer of the same transactional id (fencing the old one). At the end kcodec's and
    confluent-kafka's read_committed consumers see exactly one copy of every input."""
    import random

    from kcodec.client import Consumer
    from kcodec.errors import KcodecError

    rng = random.Random(2468)
    src, dst = _topic(broker.bootstrap, 1), _topic(broker.bootstrap, 1)
    n = 80
    with Producer(bootstrap_servers=broker.bootstrap, **FAST) as p:
        for i in range(n):
            p.send(src, f"{i}".encode(), partition=0)
    kills: list[str] = []

    def maybe_kill(where: str) -> None:
        if len(kills) < 6 and rng.random() < 0.12:
            broker.kill9()
            kills.append(where)
            broker.start()

    done, rounds = False, 0
    deadline = time.monotonic() + 150
    while not done and time.monotonic() < deadline:
        rounds += 1
        c = Consumer(bootstrap_servers=broker.bootstrap, group_id=f"g-{src}",
                     auto_offset_reset="earliest", enable_auto_commit=False,
                     isolation_level="read_committed", max_poll_records=5, **FAST)
        p = Producer(bootstrap_servers=broker.bootstrap, transactional_id=f"k9-{src}", **FAST)
        try:
            p.init_transactions()
            c.assign([(src, 0)])
            idle = 0
            while True:
                polled = c.poll(0.3)
                if not polled:
                    idle += 1
                    if idle >= 4:
                        done = True
                        break
                    continue
                idle = 0
                p.begin_transaction()
                for recs in polled.values():
                    for r in recs:
                        p.send(dst, b"x" + r.value, partition=0)
                maybe_kill("sent")
                p.flush()
                maybe_kill("flushed")
                p.send_offsets_to_transaction(
                    {tp: recs[-1].offset + 1 for tp, recs in polled.items()}, c.group_metadata())
                maybe_kill("offsets added")
                p.commit_transaction()
                maybe_kill("committed")
        except (KcodecError, TimeoutError, ConnectionError):
            pass        # this round cannot go on: start over
        finally:
            p.close(0)
            c.close()
    assert done and len(kills) >= 3, (done, kills, rounds)
    expected = [b"x" + f"{i}".encode() for i in range(n)]
    assert kcodec_read(broker.bootstrap, dst, "read_committed", n, timeout=30) == expected
    assert confluent_read(broker.bootstrap, dst, n, timeout=30) == expected
