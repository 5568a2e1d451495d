"""The group coordinator: rebalances, session timeouts, static membership, offsets, and the
group APIs through kcodec's admin client."""

from __future__ import annotations

import concurrent.futures
import time

import pytest

from kcodec.broker.coordinator import GroupCoordinator, OffsetStore
from kcodec.broker.purgatory import Timer
from kcodec.protocol import ErrorCode

E = ErrorCode
PROTO = [("range", b"meta")]


@pytest.fixture
def gc():
    timer = Timer()
    yield GroupCoordinator(timer)
    timer.stop()


def result(x, timeout=5):
    return x.result(timeout) if isinstance(x, concurrent.futures.Future) else x


def join(gc, member="", instance=None, session=10_000, rebalance=2_000):
    return gc.join("g", member, instance, "consumer", PROTO, session, rebalance, "c", "/127.0.0.1")


def test_two_members_rebalance_sync_and_heartbeat(gc):
    a = result(join(gc))
    assert a.error_code == 0 and a.leader == a.member_id and len(a.members) == 1
    assert result(gc.sync("g", a.generation_id, a.member_id, None, {a.member_id: b"A"})) == (0, b"A")
    fb = join(gc)                                      # a second member: a rebalance starts
    assert gc.heartbeat("g", a.generation_id, a.member_id, None) == E.REBALANCE_IN_PROGRESS
    fa = join(gc, a.member_id)                         # the first one rejoins: it completes
    a2, b = result(fa), result(fb)
    assert a2.generation_id == b.generation_id == a.generation_id + 1
    assert a2.leader == a.member_id and len(a2.members) == 2 and b.members == []
    fs_b = gc.sync("g", b.generation_id, b.member_id, None, {})
    assert isinstance(fs_b, concurrent.futures.Future) and not fs_b.done()   # waits for the leader
    assert result(gc.sync("g", a2.generation_id, a.member_id, None,
                          {a.member_id: b"A2", b.member_id: b"B2"})) == (0, b"A2")
    assert result(fs_b) == (0, b"B2")
    assert gc.heartbeat("g", b.generation_id, b.member_id, None) == 0
    assert gc.heartbeat("g", b.generation_id - 1, b.member_id, None) == E.ILLEGAL_GENERATION
    assert gc.heartbeat("g", b.generation_id, "nobody", None) == E.UNKNOWN_MEMBER_ID
    assert gc.groups["g"].state == "Stable"


def test_rebalance_timeout_removes_members_that_do_not_rejoin(gc):
    a = result(join(gc, rebalance=300))
    gc.sync("g", a.generation_id, a.member_id, None, {})
    t0 = time.monotonic()
    b = result(join(gc, rebalance=300))                # a never rejoins
    assert time.monotonic() - t0 >= 0.25
    assert b.leader == b.member_id and [m[0] for m in b.members] == [b.member_id]
    assert a.member_id not in gc.groups["g"].members


def test_an_empty_group_waits_the_initial_delay_whatever_its_generation():
    """Kafka delays the first join of an Empty group by group.initial.rebalance.delay.ms,
    not only a new group's: one Empty again at a later generation, or kept across a restart."""
    timer = Timer()
    gc = GroupCoordinator(timer, initial_rebalance_delay_ms=300)
    try:
        t0 = time.monotonic()
        a = result(join(gc))
        assert time.monotonic() - t0 >= 0.25 and a.generation_id == 1
        assert gc.leave("g", [(a.member_id, None)])[0] == 0
        assert gc.groups["g"].state == "Empty"
        t0 = time.monotonic()
        b = result(join(gc))
        assert time.monotonic() - t0 >= 0.25 and b.generation_id > a.generation_id
        result(gc.sync("g", b.generation_id, b.member_id, None, {b.member_id: b"B"}))
        t0 = time.monotonic()                  # a Stable group's rebalance: no initial delay
        fc = join(gc)
        fb = join(gc, b.member_id)
        assert result(fb).generation_id == result(fc).generation_id == b.generation_id + 1
        assert time.monotonic() - t0 < 0.25
    finally:
        timer.stop()


def test_session_timeout_expires_a_silent_member(gc):
    a = result(join(gc, session=400))
    gc.sync("g", a.generation_id, a.member_id, None, {a.member_id: b"x"})
    time.sleep(1.0)
    g = gc.groups["g"]
    assert a.member_id not in g.members and g.state == "Empty"


class _NoSweep(Timer):
    """A timer whose periodic jobs never run (the session sweep among them)."""

    def every(self, period_s, fn):
        pass


def test_delete_group_ends_sessions_that_ran_out_since_the_sweep():
    # static members do not leave at close; DeleteGroups a session timeout later finds
    # the group empty, whenever the periodic sweep last ran
    timer = _NoSweep()
    gc = GroupCoordinator(timer)
    try:
        a = result(join(gc, instance="i-1", session=200))
        gc.sync("g", a.generation_id, a.member_id, "i-1", {a.member_id: b"x"})
        assert gc.delete_group("g") == E.NON_EMPTY_GROUP
        time.sleep(0.3)
        assert gc.delete_group("g") == 0
    finally:
        timer.stop()


def test_leave_group(gc):
    a = result(join(gc))
    gc.sync("g", a.generation_id, a.member_id, None, {})
    assert gc.leave("g", [(a.member_id, None), ("ghost", None)]) == (0, [0, E.UNKNOWN_MEMBER_ID])
    assert gc.groups["g"].state == "Empty"


def test_static_member_rejoins_without_a_rebalance(gc):
    a = result(join(gc, instance="i-1"))
    gen = a.generation_id
    gc.sync("g", gen, a.member_id, "i-1", {a.member_id: b"A"})
    f2 = join(gc, instance="i-2")
    fa = join(gc, a.member_id, instance="i-1")
    a2, m2 = result(fa), result(f2)
    leader = a2 if a2.leader == a2.member_id else m2
    gc.sync("g", leader.generation_id, leader.member_id, None,
            {a2.member_id: b"A", m2.member_id: b"B"})
    gen = m2.generation_id
    # i-2 restarts: same instance id, new member id, no rebalance, its assignment kept
    again = result(join(gc, instance="i-2"))
    assert again.error_code == 0 and again.generation_id == gen and again.member_id != m2.member_id
    assert result(gc.sync("g", gen, again.member_id, "i-2", {})) == (0, b"B")
    # the old instance is fenced
    assert gc.heartbeat("g", gen, m2.member_id, "i-2") == E.FENCED_INSTANCE_ID
    assert gc.groups["g"].state == "Stable"


def test_offsets_commit_fetch_delete_and_persistence(tmp_path):
    timer = Timer()
    try:
        gc = GroupCoordinator(timer, OffsetStore(str(tmp_path)))
        assert gc.commit("g", -1, "", None, [("t", 0, 42, 3, "m"), ("t", 1, 7, -1, None)]) == 0
        assert gc.offsets.committed("g") == {("t", 0): (42, 3, "m"), ("t", 1): (7, -1, None)}
        a = result(join(gc))
        assert gc.commit("g", a.generation_id + 5, a.member_id, None, [("t", 0, 1, -1, "")]) \
            == E.ILLEGAL_GENERATION
        # a live member whose subscription cannot be read: every topic counts as subscribed
        assert gc.delete_offsets("g", [("t", 1)]) == (0, {("t", 1): E.GROUP_SUBSCRIBED_TO_TOPIC})
        assert gc.delete_group("g") == E.NON_EMPTY_GROUP
        gc.leave("g", [(a.member_id, None)])
        assert gc.delete_offsets("g", [("t", 1)]) == (0, {("t", 1): 0})
        gc.close()
        gc2 = GroupCoordinator(timer, OffsetStore(str(tmp_path)))   # a restart reads them back
        assert gc2.offsets.committed("g") == {("t", 0): (42, 3, "m")}
        assert gc2.delete_group("g") == 0 and gc2.delete_group("g") == E.GROUP_ID_NOT_FOUND
        gc2.close()
        assert GroupCoordinator(timer, OffsetStore(str(tmp_path))).offsets.committed("g") == {}
    finally:
        timer.stop()


@pytest.mark.peers
def test_static_membership_with_confluent_kafka():
    import confluent_kafka as ck

    from kcodec.broker import Cluster

    with Cluster(1) as c:
        c.create_topic("s", 2)

        def consumer():
            con = ck.Consumer({"bootstrap.servers": c.bootstrap, "group.id": "static",
                               "group.instance.id": "worker-1", "session.timeout.ms": 6000,
                               "auto.offset.reset": "earliest"})
            con.subscribe(["s"])
            deadline = time.monotonic() + 20
            while not con.assignment() and time.monotonic() < deadline:
                con.poll(0.2)
            return con
        first = consumer()
        assert len(first.assignment()) == 2
        gen = c.groups.groups["static"].generation
        first.close()              # a static member does not leave on close
        assert len(c.groups.groups["static"].members) == 1
        second = consumer()        # same instance id: takes over, no new generation
        assert len(second.assignment()) == 2
        assert c.groups.groups["static"].generation == gen
        second.close()


def test_group_apis_through_the_admin_client():
    from kcodec.broker import Cluster
    from kcodec.client import Admin, Consumer

    with Cluster(3) as c:
        c.create_topic("t", 3)
        with Consumer(bootstrap_servers=c.bootstrap, group_id="adm", auto_offset_reset="earliest") as con:
            con.subscribe(["t"])
            deadline = time.monotonic() + 20
            while not con.assignment() and time.monotonic() < deadline:
                con.poll(0.2)
            with Admin(bootstrap_servers=c.bootstrap) as admin:
                (desc,) = admin.describe_groups(["adm"])
                assert desc.state == "Stable" and len(desc.members) == 1
                assert [g.group_id for g in admin.list_groups()] == ["adm"]


def _stable_pair(gc, session_b=10_000):
    """Two members, Stable: a (the leader) assigned b"A", b assigned b"B"."""
    a = result(join(gc))
    result(gc.sync("g", a.generation_id, a.member_id, None, {a.member_id: b"A"}))
    fb = join(gc, session=session_b)
    a2, b = result(join(gc, a.member_id)), result(fb)
    fs_b = gc.sync("g", b.generation_id, b.member_id, None, {})
    assert result(gc.sync("g", a2.generation_id, a.member_id, None,
                          {a.member_id: b"A", b.member_id: b"B"})) == (0, b"A")
    assert result(fs_b) == (0, b"B")
    return a2, b


def test_membership_survives_a_coordinator_restart(tmp_path):
    timer = Timer()
    try:
        gc = GroupCoordinator(timer, OffsetStore(str(tmp_path)))
        a, b = _stable_pair(gc, session_b=800)
        gen = a.generation_id
        gc.close()                                    # the broker goes; a new one loads the log
        gc2 = GroupCoordinator(timer, OffsetStore(str(tmp_path)))
        g = gc2.groups["g"]
        assert (g.state, g.generation, g.leader, g.protocol_type, g.protocol_name) == \
            ("Stable", gen, a.member_id, "consumer", "range")
        assert list(g.members) == [a.member_id, b.member_id]
        ma = g.members[a.member_id]
        assert (ma.client_id, ma.client_host, ma.session_timeout_ms, ma.rebalance_timeout_ms,
                ma.protocols) == ("c", "/127.0.0.1", 10_000, 2_000, PROTO)
        # both go on at their generation: no rebalance, their assignments as they were
        assert gc2.heartbeat("g", gen, a.member_id, None) == 0
        assert gc2.heartbeat("g", gen, b.member_id, None) == 0
        assert result(gc2.sync("g", gen, b.member_id, None, {})) == (0, b"B")
        assert result(gc2.sync("g", gen, a.member_id, None, {})) == (0, b"A")
        assert gc2.commit("g", gen, a.member_id, None, [("t", 0, 5, -1, None)]) == 0
        assert g.state == "Stable" and g.generation == gen
        # b never comes back: it expires after its session timeout and a rebalance follows
        deadline = time.monotonic() + 5
        while b.member_id in g.members and time.monotonic() < deadline:
            assert gc2.heartbeat("g", gen, a.member_id, None) in (0, E.REBALANCE_IN_PROGRESS)
            time.sleep(0.1)
        assert b.member_id not in g.members and g.state == "PreparingRebalance"
        assert gc2.heartbeat("g", gen, a.member_id, None) == E.REBALANCE_IN_PROGRESS
        a3 = result(join(gc2, a.member_id))
        assert a3.generation_id == gen + 1 and [m[0] for m in a3.members] == [a.member_id]
        gc2.close()
    finally:
        timer.stop()


def test_a_restored_member_leaves_and_the_empty_group_is_kept(tmp_path):
    timer = Timer()
    try:
        gc = GroupCoordinator(timer, OffsetStore(str(tmp_path)))
        a, b = _stable_pair(gc)
        gc.close()
        gc2 = GroupCoordinator(timer, OffsetStore(str(tmp_path)))
        assert gc2.leave("g", [(a.member_id, None), (b.member_id, None)]) == (0, [0, 0])
        g = gc2.groups["g"]
        assert g.state == "Empty" and not g.members and g.generation == a.generation_id + 1
        gc2.close()
        gc3 = GroupCoordinator(timer, OffsetStore(str(tmp_path)))   # Empty: no one comes back
        g = gc3.groups["g"]
        assert (g.state, g.generation, g.protocol_type, dict(g.members)) == \
            ("Empty", a.generation_id + 1, "consumer", {})
        assert gc3.heartbeat("g", a.generation_id, a.member_id, None) == E.UNKNOWN_MEMBER_ID
        assert gc3.delete_group("g") == 0
        gc3.close()
        assert "g" not in GroupCoordinator(timer, OffsetStore(str(tmp_path))).groups
    finally:
        timer.stop()


def test_a_static_member_restored_under_the_member_id_it_took_over(tmp_path):
    timer = Timer()
    try:
        gc = GroupCoordinator(timer, OffsetStore(str(tmp_path)))
        a = result(join(gc, instance="i-1"))
        result(gc.sync("g", a.generation_id, a.member_id, "i-1", {a.member_id: b"A"}))
        a2 = result(join(gc, instance="i-1"))         # a restarted instance: no rebalance
        assert a2.member_id != a.member_id and a2.generation_id == a.generation_id
        gc.close()
        gc2 = GroupCoordinator(timer, OffsetStore(str(tmp_path)))
        assert gc2.heartbeat("g", a.generation_id, a2.member_id, "i-1") == 0
        assert gc2.heartbeat("g", a.generation_id, a.member_id, "i-1") == E.FENCED_INSTANCE_ID
        assert result(gc2.sync("g", a.generation_id, a2.member_id, "i-1", {})) == (0, b"A")
        gc2.close()
    finally:
        timer.stop()
