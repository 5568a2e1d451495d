"""Online migration of a group between the classic protocol and KIP-848's consumer protocol
on kcodec's broker: a consumer-protocol member joining a classic group converts it (upgrade),
the last one leaving converts it back (downgrade), as Kafka's
``group.consumer.migration.policy`` rules; committed offsets survive both ways and no
partition is ever held by two members. kcodec and confluent-kafka members, both protocols."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from kcodec.broker import Cluster
from kcodec.broker.coordinator.classic_group import GroupCoordinator
from kcodec.broker.coordinator.consumer_group import ConsumerGroupCoordinator
from kcodec.broker.coordinator.migration import upgrade
from kcodec.broker.purgatory import Timer
from kcodec.client import Admin, Consumer, Producer
from kcodec.client.consumer import RebalanceListener
from kcodec.protocol import CLASSES, ConsumerProtocolAssignment, ErrorCode
from kcodec.protocol.consumer import ConsumerProtocolSubscription, encode_versioned
from tests.support.broker_raw import Raw

E = ErrorCode
HBReq = CLASSES["ConsumerGroupHeartbeatRequest"]
TOPIC = "t"


def _produce(c: Cluster, start: int, n: int) -> None:
    with Producer(bootstrap_servers=c.bootstrap) as p:
        for i in range(start, start + n):
            p.send(TOPIC, value=b"%d" % i, partition=i % 4)
        p.flush()


def _server_owners(c: Cluster, gid: str) -> list[tuple[str, int]]:
    """Every partition some member of the consumer group holds (assigned or still to
    revoke), one entry per holder: a duplicate is a double assignment."""
    coord = c.consumer_groups
    with coord.lock:
        g = coord.groups.get(gid)
        if g is None:
            return []
        return [(t, p) for m in g.members.values()
                for owned in (m.assigned, m.revoking) for t, ps in owned.items() for p in ps]


class _Runner(threading.Thread):
    """One consumer polled in its own thread (a classic consumer's poll blocks through a
    rebalance, so members sharing a thread would wait for each other): what it reads goes
    to ``seen``; ``view`` is what it owns, kept by its rebalance callbacks (revoked before a
    partition moves, assigned after), so two views sharing a partition is a double
    assignment; ``commit()`` and ``close()`` run in the thread."""

    def __init__(self, kind: str, seen: list, lock: threading.Lock) -> None:
        super().__init__(daemon=True)
        self.con: Any = None
        self.kind, self.seen, self.lock = kind, seen, lock
        self.view: set[tuple[str, int]] = set()
        self.todo: list[tuple[str, threading.Event]] = []
        self.error: BaseException | None = None
        self.stopped = False

    def gained(self, tps) -> None:
        with self.lock:
            self.view |= {(tp.topic, tp.partition) for tp in tps}

    def dropped(self, tps) -> None:
        with self.lock:
            self.view -= {(tp.topic, tp.partition) for tp in tps}

    def run(self) -> None:
        try:
            while not self.stopped:
                if self.kind == "kcodec":
                    got = [r.value for recs in self.con.poll(0.05).values() for r in recs]
                else:
                    msg = self.con.poll(0.05)
                    got = [msg.value()] if msg is not None and msg.error() is None else []
                with self.lock:
                    self.seen.extend(got)
                while self.todo:
                    what, done = self.todo.pop(0)
                    getattr(self, "_" + what)()
                    done.set()
        except BaseException as exc:   # reported by the test
            self.error = exc

    def _commit(self) -> None:
        if self.kind == "kcodec":
            self.con.commit()
        else:
            try:
                self.con.commit(asynchronous=False)
            except Exception as exc:     # nothing consumed: _NO_OFFSET
                if "NO_OFFSET" not in str(exc):
                    raise

    def _close(self) -> None:
        self.con.close()
        self.stopped = True
        with self.lock:
            self.view = set()

    def ask(self, what: str, timeout: float = 30) -> None:
        done = threading.Event()
        self.todo.append((what, done))
        assert done.wait(timeout) or self.error is not None, f"{what} did not finish"
        if self.error is not None:
            raise self.error


class Members:
    """kcodec and confluent-kafka members of one group, each in its own thread."""

    def __init__(self, c: Cluster, gid: str) -> None:
        self.c, self.gid = c, gid
        self.runners: dict[str, _Runner] = {}
        self.seen: list[bytes] = []
        self.lock = threading.Lock()
        self.overlaps: list = []

    def add_kcodec(self, name: str, **kw) -> None:
        kw.setdefault("heartbeat_interval_ms", 100)
        kw.setdefault("group_protocol", "classic")     # (the default is consumer)
        r = _Runner("kcodec", self.seen, self.lock)
        r.con = Consumer(bootstrap_servers=self.c.bootstrap, group_id=self.gid,
                         auto_offset_reset="earliest", enable_auto_commit=False, **kw)

        class Listener(RebalanceListener):
            def on_partitions_assigned(self, tps):
                r.gained(tps)

            def on_partitions_revoked(self, tps):
                r.dropped(tps)

        r.con.subscribe([TOPIC], Listener())
        self.runners[name] = r
        r.start()

    def add_confluent(self, name: str, protocol: str) -> None:
        ck = pytest.importorskip("confluent_kafka")
        conf = {"bootstrap.servers": self.c.bootstrap, "group.id": self.gid,
                "auto.offset.reset": "earliest", "enable.auto.commit": False,
                "group.protocol": protocol}
        if protocol == "classic":
            conf.update({"heartbeat.interval.ms": 200, "partition.assignment.strategy": "range"})
        r = _Runner("confluent", self.seen, self.lock)
        r.con = ck.Consumer(conf)
        r.con.subscribe([TOPIC], on_assign=lambda _c, tps: r.gained(tps),
                        on_revoke=lambda _c, tps: r.dropped(tps),
                        on_lost=lambda _c, tps: r.dropped(tps))
        self.runners[name] = r
        r.start()

    def views(self) -> dict[str, set[tuple[str, int]]]:
        with self.lock:
            return {n: set(r.view) for n, r in self.runners.items()}

    def distinct_seen(self) -> set[bytes]:
        with self.lock:
            return set(self.seen)

    def poll_until(self, cond, timeout: float = 40.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for n, r in self.runners.items():
                if r.error is not None:
                    raise AssertionError(f"member {n} failed") from r.error
            self._check()
            if cond(self.views()):
                return True
            time.sleep(0.02)
        return False

    def _check(self) -> None:
        owners = _server_owners(self.c, self.gid)
        if len(owners) != len(set(owners)):
            self.overlaps.append(("server", sorted(owners)))
        views = self.views()
        flat = [tp for v in views.values() for tp in v]
        if len(flat) != len(set(flat)):
            self.overlaps.append(("clients", views))

    def commit(self) -> None:
        for r in self.runners.values():
            r.ask("commit")

    def close(self, name: str) -> None:
        r = self.runners.pop(name)
        r.ask("close")
        r.join(10)

    def close_all(self) -> None:
        for name in list(self.runners):
            try:
                self.close(name)
            except BaseException:     # the test's own failure matters more
                pass


def _covered(views: dict, names: list[str] | None = None) -> bool:
    flat = [tp for n, v in views.items() if names is None or n in names for tp in v]
    return len(flat) == 4 and len(set(flat)) == 4


@pytest.fixture
def cluster():
    with Cluster(1) as c:
        c.consumer_groups.heartbeat_interval_ms = 100
        c.create_topic(TOPIC, 4)
        _produce(c, 0, 40)
        yield c


def _commit_until(c: Cluster, m: Members, gid: str, total: int, timeout: float = 30) -> None:
    """Each member commits what it consumed, until the group's offsets add up to ``total``
    (a member that got its partitions late may not have read them yet)."""
    deadline = time.monotonic() + timeout
    with Admin(bootstrap_servers=c.bootstrap) as admin:
        while True:
            m.commit()
            got = sum(admin.committed_offsets(gid, [TOPIC]).values())
            if got == total or time.monotonic() > deadline:
                break
            m.poll_until(lambda v: False, timeout=0.3)
    assert got == total


def _phases(c: Cluster, m: Members, gid: str, add_joiner) -> None:
    classic = list(m.views())
    # 1. classic group: the first 40 records consumed and committed
    assert m.poll_until(lambda v: _covered(v) and all(v[n] for n in classic)
                        and len(m.distinct_seen()) == 40), m.views()
    _commit_until(c, m, gid, 40)
    assert c.consumer_groups.describe(gid) is None and len(c.groups.groups[gid].members) == 2
    with m.lock:
        m.seen.clear()
    _produce(c, 40, 40)
    # 2. upgrade: the consumer-protocol member joins and gets its share
    joiner = add_joiner()
    assert m.poll_until(lambda v: _covered(v) and v[joiner] and all(v[n] for n in classic)), \
        m.views()
    g = c.consumer_groups.describe(gid)
    assert g is not None and sorted(x.classic for x in g.members.values()) == [False, True, True]
    assert not c.groups.groups[gid].members           # the classic record stays, Empty
    assert m.poll_until(lambda v: len(m.distinct_seen()) == 40, timeout=20)
    # the committed offsets were kept: nothing of the first 40 came again
    assert m.distinct_seen() == {b"%d" % i for i in range(40, 80)}
    _commit_until(c, m, gid, 80)
    # 3. downgrade: the consumer-protocol member leaves, the classic ones share everything
    m.close(joiner)
    assert m.poll_until(lambda v: _covered(v) and all(v[n] for n in classic)), m.views()
    assert c.consumer_groups.describe(gid) is None
    cg = c.groups.groups[gid]
    assert cg.protocol_type == "consumer" and len(cg.members) == 2
    assert m.poll_until(lambda v: cg.state == "Stable", timeout=20)
    with Admin(bootstrap_servers=c.bootstrap) as admin:
        after = admin.committed_offsets(gid, [TOPIC])
    assert sum(after.values()) == 80              # kept through the downgrade
    assert m.overlaps == []


@pytest.mark.slow
def test_kcodec_classic_group_upgraded_and_downgraded_online(cluster):
    gid = f"up-{uuid.uuid4().hex[:6]}"
    m = Members(cluster, gid)
    try:
        m.add_kcodec("classic-a")
        m.add_kcodec("classic-b")

        def join() -> str:
            m.add_kcodec("new", group_protocol="consumer", heartbeat_interval_ms=3000)
            return "new"

        _phases(cluster, m, gid, join)
    finally:
        m.close_all()


@pytest.mark.slow
@pytest.mark.peers
def test_confluent_kafka_member_upgrades_a_mixed_classic_group(cluster):
    """A classic group of a kcodec and a confluent-kafka member; a confluent-kafka consumer
    with group.protocol=consumer joins it and leaves again."""
    gid = f"ck-{uuid.uuid4().hex[:6]}"
    m = Members(cluster, gid)
    try:
        m.add_kcodec("kcodec-classic", partition_assignment_strategy="range")
        m.add_confluent("confluent-classic", "classic")

        def join() -> str:
            m.add_confluent("confluent-new", "consumer")
            return "confluent-new"

        _phases(cluster, m, gid, join)
    finally:
        m.close_all()


# ---------------------------------------------------------------- the rules, step by step
def _heartbeat(raw: Raw, gid: str, member: str = "", epoch: int = 0) -> object:
    return raw.call(HBReq(group_id=gid, member_id=member, member_epoch=epoch,
                          rebalance_timeout_ms=30000,
                          subscribed_topic_names=[TOPIC] if epoch == 0 else None,
                          topic_partitions=[] if epoch == 0 else None), 0)


def _classic_member(c: Cluster, gid: str) -> Consumer:
    con = Consumer(bootstrap_servers=c.bootstrap, group_id=gid, auto_offset_reset="earliest",
                   heartbeat_interval_ms=100, group_protocol="classic")
    con.subscribe([TOPIC])
    deadline = time.monotonic() + 20
    while len(con.assignment()) != 4 and time.monotonic() < deadline:
        con.poll(0.05)
    assert len(con.assignment()) == 4
    return con


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_policy_without_upgrade_refuses_a_consumer_member(policy):
    with Cluster(1, group_consumer_migration_policy=policy) as c:
        c.create_topic(TOPIC, 4)
        con = _classic_member(c, "g")
        try:
            with Raw(c.bootstrap) as raw:
                assert _heartbeat(raw, "g").error_code == E.GROUP_ID_NOT_FOUND
            assert c.consumer_groups.describe("g") is None
        finally:
            con.close()


def test_policy_upgrade_only_keeps_the_consumer_group_when_the_last_new_member_leaves():
    with Cluster(1, group_consumer_migration_policy="upgrade") as c:
        c.consumer_groups.heartbeat_interval_ms = 100
        c.create_topic(TOPIC, 4)
        con = _classic_member(c, "g")
        try:
            with Raw(c.bootstrap) as raw:
                r = _heartbeat(raw, "g")
                assert r.error_code == 0
                assert c.consumer_groups.describe("g") is not None
                assert _heartbeat(raw, "g", r.member_id, -1).error_code == 0
            g = c.consumer_groups.describe("g")
            assert g is not None and [x.classic for x in g.members.values()] == [True]
        finally:
            con.close()


def test_bad_policy_name_is_refused():
    with pytest.raises(ValueError, match="group_consumer_migration_policy must be one of"):
        Cluster(1, group_consumer_migration_policy="sideways")


def _sub(topics: list[str]) -> bytes:
    return encode_versioned(ConsumerProtocolSubscription(topics=topics), 0)


def _assign(parts: list[int]) -> bytes:
    A = ConsumerProtocolAssignment
    return encode_versioned(A(assigned_partitions=[A.TopicPartition(topic=TOPIC,
                                                                    partitions=parts)]), 0)


def test_conversion_keeps_each_classic_assignment_and_moves_nothing_before_revocation():
    """The coordinators without the network: two classic members (p0 p1 / p2 p3) are
    converted; the new member gets nothing a classic member still holds; the classic members
    learn of the change from their Heartbeat and give up partitions before they move."""
    from kcodec.broker.state import ClusterState

    timer = Timer()
    try:
        state = ClusterState(None)
        state.nodes = [0]
        state.open()
        state.create_topic(TOPIC, 4)
        classic = GroupCoordinator(timer)
        consumer = ConsumerGroupCoordinator(timer, state)
        consumer.classic = classic
        protos = [("range", _sub([TOPIC]))]
        first = classic.join("g", "", None, "consumer", protos, 10000, 10000, "a", "/h").result(5)
        fb = classic.join("g", "", None, "consumer", protos, 10000, 10000, "b", "/h")
        fa = classic.join("g", first.member_id, None, "consumer", protos, 10000, 10000, "a", "/h")
        ja, jb = fa.result(5), fb.result(5)
        gen = ja.generation_id
        leader, other = (ja, jb) if ja.leader == ja.member_id else (jb, ja)
        sync_other = classic.sync("g", gen, other.member_id, None, {})
        synced = classic.sync("g", gen, leader.member_id, None,
                              {leader.member_id: _assign([0, 1]), other.member_id: _assign([2, 3])})
        assert synced.result(5)[0] == 0 and sync_other.result(5)[0] == 0
        with consumer.lock:
            assert upgrade(consumer, classic, "g")
        g = consumer.groups["g"]
        assert g.epoch == gen and {mid: x.assigned for mid, x in g.members.items()} == {
            leader.member_id: {TOPIC: {0, 1}}, other.member_id: {TOPIC: {2, 3}}}
        assert all(x.classic and x.epoch == gen for x in g.members.values())
        assert classic.heartbeat("g", gen, leader.member_id, None) == E.UNKNOWN_MEMBER_ID
        assert consumer.classic_heartbeat("g", leader.member_id, gen) == 0   # nothing changed yet
        code, msg, new_id, epoch, got = consumer.heartbeat(
            "g", "", 0, instance_id=None, rack_id=None, rebalance_timeout_ms=10000,
            topics=[TOPIC], assignor=None, owned={}, client_id="n", client_host="/h")
        assert code == 0 and got == {}                      # all four are still held
        # (the uniform assignor is sticky: one of them may keep both of its partitions)
        told = [mid for mid in (leader.member_id, other.member_id)
                if consumer.classic_heartbeat("g", mid, gen) == E.REBALANCE_IN_PROGRESS]
        assert told
        # the classic members told rejoin: each is told to keep only part of what it has ...
        kept = {}
        for mid in told:
            code, _, _ = consumer.classic_join("g", mid, 10000, 10000, [TOPIC],
                                               dict(g.members[mid].assigned), "c", "/h")
            assert code == 0
            kept[mid] = consumer.classic_sync("g", mid, g.members[mid].epoch)[1]
        assert sum(len(ps) for o in kept.values() for ps in o.values()) < 2 * len(told)
        owners = _owners_of(consumer, "g")
        assert sorted(owners) == sorted(set(owners)) and len(owners) == 4   # revoking ones too
        code, msg, _, epoch, got = consumer.heartbeat(
            "g", new_id, epoch, instance_id=None, rack_id=None, rebalance_timeout_ms=10000,
            topics=None, assignor=None, owned={}, client_id="n", client_host="/h")
        assert code == 0 and not got                        # not released yet: nothing moves
        # ... and once they rejoin owning only that, the rest moves, round by round (a
        # classic member may have to wait for a partition the other still gives up)
        for _ in range(6):
            for mid in (leader.member_id, other.member_id):
                x = g.members[mid]
                if consumer.classic_heartbeat("g", mid, x.epoch) == E.REBALANCE_IN_PROGRESS:
                    code, _, _ = consumer.classic_join("g", mid, 10000, 10000, [TOPIC],
                                                       dict(x.assigned), "c", "/h")
                    assert code == 0
                owners = _owners_of(consumer, "g")
                assert sorted(owners) == sorted(set(owners))     # never two holders
            code, msg, _, epoch, got = consumer.heartbeat(
                "g", new_id, epoch, instance_id=None, rack_id=None, rebalance_timeout_ms=10000,
                topics=None, assignor=None, owned=g.members[new_id].assigned, client_id="n",
                client_host="/h")
            assert code == 0
            owners = _owners_of(consumer, "g")
            assert sorted(owners) == sorted(set(owners))
            if g.state == "Stable":
                break
        assert g.state == "Stable" and len(_owners_of(consumer, "g")) == 4
        assert g.members[new_id].assigned                   # the new member got its share
        state.close()
    finally:
        timer.stop()


def _owners_of(consumer: ConsumerGroupCoordinator, gid: str) -> list[tuple[str, int]]:
    g = consumer.groups[gid]
    return [(t, p) for x in g.members.values() for o in (x.assigned, x.revoking)
            for t, ps in o.items() for p in ps]


# ------------------------------------------------- describing a group on either protocol
DGReq = CLASSES["DescribeGroupsRequest"]


def _raw_describe(c: Cluster, gid: str, version: int) -> Any:
    with Raw(c.bootstrap) as raw:
        (g,) = raw.call(DGReq(groups=[gid], include_authorized_operations=False), version).groups
    return g


def _ck_describe(c: Cluster, gid: str) -> Any:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    return admin.describe_consumer_groups([gid], request_timeout=10)[gid].result(20)


def test_describe_groups_answers_dead_for_a_converted_group():
    """The quick form of the test below: a classic group converted by a raw heartbeat."""
    with Cluster(1) as c:
        c.create_topic(TOPIC, 4)
        con = _classic_member(c, "q")
        try:
            with Raw(c.bootstrap) as raw:
                assert _heartbeat(raw, "q").error_code == 0
                g = _raw_describe(c, "q", 5)
                assert (g.error_code, g.group_state, g.protocol_type, g.members) == \
                    (0, "Dead", "", [])
                g = _raw_describe(c, "q", 6)
                assert (g.error_code, g.error_message) == \
                    (E.GROUP_ID_NOT_FOUND, "Group q is not a classic group.")
                with Admin(bootstrap_servers=c.bootstrap) as admin:
                    (d,) = admin.describe_groups(["q"])
                assert (d.type, d.protocol_type, d.protocol) == ("consumer", "consumer", "uniform")
                assert sorted(m.client_id for m in d.members) == ["kcodec", "raw"]
        finally:
            con.close()


@pytest.mark.peers
@pytest.mark.slow
def test_describe_a_group_before_and_after_its_upgrade_as_kafka_4_does():
    """DescribeGroups describes classic groups only: once converted to the consumer
    protocol the group is ``Dead`` there (v6: GROUP_ID_NOT_FOUND, "not a classic group") and
    ConsumerGroupDescribe shows it with its classic member; kcodec's Admin and
    confluent-kafka's AdminClient ask that first and show the group whichever its protocol."""
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType

    from tests.client.consumer.test_consumer_group import _consumer, _poll_until

    with Cluster(1) as c:
        c.consumer_groups.heartbeat_interval_ms = 100
        c.create_topic(TOPIC, 4)
        old = _classic_member(c, "d")
        new = None
        try:
            # classic: DescribeGroups describes it; ConsumerGroupDescribe does not know it
            g = _raw_describe(c, "d", 5)
            assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == \
                (0, "Stable", "consumer", "range")
            assert len(g.members) == 1 and g.members[0].member_assignment
            with Admin(bootstrap_servers=c.bootstrap) as admin:
                (d,) = admin.describe_groups(["d"])
            assert (d.type, d.state, d.protocol) == ("classic", "Stable", "range")
            assert d.members[0].assignment == {TOPIC: [0, 1, 2, 3]}
            ck = _ck_describe(c, "d")
            assert (ck.type, ck.state, ck.partition_assignor) == \
                (ConsumerGroupType.CLASSIC, ConsumerGroupState.STABLE, "range")
            # a consumer-protocol member joins: the group converts and both share it
            new = _consumer(c, "d")
            assert _poll_until([old, new], lambda: (
                len(old.assignment()) == 2 and len(new.assignment()) == 2
                and c.consumer_groups.describe("d").state == "Stable"), [])
            # the classic API: Dead, no members (v6 says why)
            g = _raw_describe(c, "d", 5)
            assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data, g.members) == \
                (0, "Dead", "", "", [])
            g = _raw_describe(c, "d", 6)
            assert (g.error_code, g.group_state, g.members) == (E.GROUP_ID_NOT_FOUND, "Dead", [])
            assert g.error_message == "Group d is not a classic group."
            assert _raw_describe(c, "absent", 6).error_message == "Group absent not found."
            # the admin clients: a consumer group whose members are both, with assignments
            with Admin(bootstrap_servers=c.bootstrap) as admin:
                (d,) = admin.describe_groups(["d"])
            assert (d.type, d.state, d.protocol_type, d.protocol) == \
                ("consumer", "Stable", "consumer", "uniform")
            assert d.epoch is not None and d.epoch >= 2 and len(d.members) == 2
            got = sorted(p for m in d.members for p in m.assignment[TOPIC])
            assert got == [0, 1, 2, 3]
            assert sorted(sorted(m.assignment[TOPIC]) for m in d.members) == sorted(
                sorted(tp.partition for tp in con.assignment()) for con in (old, new))
            ck = _ck_describe(c, "d")
            assert (ck.type, ck.state, ck.partition_assignor) == \
                (ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE, "uniform")
            assert sorted((m.member_id, sorted(tp.partition for tp in m.assignment.topic_partitions))
                          for m in ck.members) == sorted(
                (m.member_id, m.assignment[TOPIC]) for m in d.members)
            # the consumer-protocol member leaves: classic again, described by DescribeGroups
            new.close()
            new = None
            assert _poll_until([old], lambda: len(old.assignment()) == 4
                               and c.groups.groups["d"].state == "Stable", [])
            assert _raw_describe(c, "d", 6).group_state == "Stable"
            with Admin(bootstrap_servers=c.bootstrap) as admin:
                (d,) = admin.describe_groups(["d"])
            assert (d.type, d.state) == ("classic", "Stable")
            assert _ck_describe(c, "d").type == ConsumerGroupType.CLASSIC
        finally:
            if new is not None:
                new.close()
            old.close()
