"""KIP-848 consumer groups: the two generated messages, the broker's coordinator
(server-side assignment, epochs, revocation before reassignment, session timeout) and kcodec
consumers with ``group_protocol="consumer"`` on kcodec's broker."""

from __future__ import annotations

import time
import uuid

import pytest

from kcodec.broker import Cluster
from kcodec.broker.coordinator.consumer_group import (
    ConsumerGroupCoordinator,
    range_assign,
    uniform_assign,
)
from kcodec.broker.purgatory import Timer
from kcodec.protocol import CLASSES, REQUESTS, RESPONSES, ErrorCode
from kcodec.protocol.framing import decode_request, encode_request

E = ErrorCode
HBReq = CLASSES["ConsumerGroupHeartbeatRequest"]
HBResp = CLASSES["ConsumerGroupHeartbeatResponse"]
DReq = CLASSES["ConsumerGroupDescribeRequest"]
DResp = CLASSES["ConsumerGroupDescribeResponse"]


# ---------------------------------------------------------------------- the messages
def test_the_two_apis_are_registered_with_their_keys() -> None:
    assert REQUESTS[68] is HBReq and RESPONSES[68] is HBResp
    assert REQUESTS[69] is DReq and RESPONSES[69] is DResp


def test_heartbeat_request_bytes_by_hand() -> None:
    # v0, flexible: compact string group "g" (len+1 = 2), member "" (1), epoch 0,
    # instance null (0), rack null (0), rebalance timeout, topics [t] (2, "t"),
    # assignor null (0), topic partitions [] (1), no tagged fields (0)
    msg = HBReq(group_id="g", member_id="", member_epoch=0, rebalance_timeout_ms=300000,
                subscribed_topic_names=["t"], topic_partitions=[])
    want = (b"\x02g" + b"\x01" + (0).to_bytes(4, "big") + b"\x00\x00" + (300000).to_bytes(4, "big")
            + b"\x02\x02t" + b"\x00" + b"\x01" + b"\x00")
    assert msg.encode(0) == want
    assert HBReq.decode(want, 0).subscribed_topic_names == ["t"]


@pytest.mark.parametrize("version", [0, 1])
def test_messages_round_trip(version: int) -> None:
    tid = uuid.uuid4()
    req = HBReq(group_id="g", member_id="m", member_epoch=3, instance_id=None, rack_id="r1",
                rebalance_timeout_ms=1000, subscribed_topic_names=None, server_assignor="range",
                topic_partitions=[HBReq.TopicPartitions(topic_id=tid, partitions=[0, 2])])
    hdr, back = decode_request(encode_request(req, version, 7)[4:])
    assert hdr.correlation_id == 7 and back == req
    resp = HBResp(error_code=0, member_id="m", member_epoch=4, heartbeat_interval_ms=500,
                  assignment=HBResp.Assignment(topic_partitions=[
                      HBResp.TopicPartitions(topic_id=tid, partitions=[1])]))
    assert HBResp.decode(resp.encode(version), version) == resp
    desc = DResp(groups=[DResp.DescribedGroup(
        error_code=0, group_id="g", group_state="Stable", group_epoch=2, assignment_epoch=2,
        assignor_name="uniform", members=[DResp.Member(
            member_id="m", member_epoch=2, client_id="c", client_host="/h",
            subscribed_topic_names=["t"],
            assignment=DResp.Assignment(topic_partitions=[
                DResp.TopicPartitions(topic_id=tid, topic_name="t", partitions=[0])]),
            target_assignment=DResp.Assignment(topic_partitions=[]))])])
    dv = min(version, DResp.MAX_VERSION)
    assert DResp.decode(desc.encode(dv), dv) == desc
    dreq = DReq(group_ids=["g"], include_authorized_operations=True)
    assert DReq.decode(dreq.encode(dv), dv) == dreq


# ---------------------------------------------------------------------- assignors
def test_assignors_cover_every_partition_once() -> None:
    members = {"a": ["t", "u"], "b": ["t"], "c": ["t", "u"]}
    counts = {"t": 7, "u": 2}
    for fn in (uniform_assign, range_assign):
        out = fn(members, counts)
        seen = [(t, p) for o in out.values() for t, ps in o.items() for p in ps]
        assert sorted(seen) == sorted([("t", p) for p in range(7)] + [("u", p) for p in range(2)])
        assert "u" not in out["b"]
    assert range_assign({"a": ["t"], "b": ["t"]}, {"t": 3}) == {"a": {"t": {0, 1}}, "b": {"t": {2}}}
    sizes = sorted(sum(len(ps) for ps in o.values()) for o in uniform_assign(members, counts).values())
    assert sizes[-1] - sizes[0] <= 1


# ---------------------------------------------------------------------- coordinator
class _Topic:
    def __init__(self, n: int) -> None:
        self.topic_id = uuid.uuid4()
        self.partitions = dict.fromkeys(range(n))


class _State:
    def __init__(self, **topics: int) -> None:
        self.topics = {name: _Topic(n) for name, n in topics.items()}


@pytest.fixture
def coord():
    timer = Timer()
    yield ConsumerGroupCoordinator(timer, _State(t=4), session_timeout_ms=1000)
    timer.stop()


def hb(coord, member="", epoch=0, topics=None, owned=None):
    return coord.heartbeat("g", member, epoch, instance_id=None, rack_id=None,
                           rebalance_timeout_ms=5000, topics=topics, assignor=None, owned=owned,
                           client_id="c", client_host="/h")


def test_revocation_comes_before_reassignment(coord) -> None:
    code, _, a, ea, got = hb(coord, "a", 0, ["t"], {})
    assert code == 0 and ea == 1 and got == {"t": {0, 1, 2, 3}}
    code, _, b, eb, got = hb(coord, "b", 0, ["t"], {})
    assert code == 0 and eb == 2 and got == {}            # a still owns everything
    _, _, _, ea2, got = hb(coord, "a", ea, None, {"t": {0, 1, 2, 3}})
    assert ea2 == ea and len(got["t"]) == 2                # revoke two, epoch unchanged
    _, _, _, eb2, got = hb(coord, "b", eb, None, {})
    assert got is None                                     # not released yet: nothing new
    _, _, _, ea3, got = hb(coord, "a", ea2, None, {"t": set(coord.groups["g"].members["a"].assigned["t"])})
    assert ea3 == 2 and got is None                        # revoked: a moves to epoch 2
    _, _, _, _, got = hb(coord, "b", eb, None, {})
    a_parts = coord.groups["g"].members["a"].assigned["t"]
    assert got == {"t": {0, 1, 2, 3} - a_parts}
    assert coord.groups["g"].state == "Stable"


def test_fencing_leave_and_session_timeout(coord) -> None:
    _, _, _, ea, _ = hb(coord, "a", 0, ["t"], {})
    assert hb(coord, "a", ea + 5, None, None)[0] == E.FENCED_MEMBER_EPOCH
    assert hb(coord, "zzz", 3, None, None)[0] == E.UNKNOWN_MEMBER_ID
    _, _, _, eb, _ = hb(coord, "b", 0, ["t"], {})
    assert coord.check_commit("g", "a", ea) == 0
    assert coord.check_commit("g", "a", ea + 1) == E.FENCED_MEMBER_EPOCH
    hb(coord, "b", -1)                                     # leave
    assert set(coord.groups["g"].members) == {"a"}
    time.sleep(1.6)                                        # a's session times out
    assert coord.groups["g"].members == {}
    assert coord.groups["g"].state == "Empty"


# ---------------------------------------------------------------------- end to end
def _poll_until(consumers, cond, seen, timeout=30.0):
    """Poll until ``cond()``; the values of the records polled go to ``seen``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            for recs in c.poll(0.05).values():
                seen.extend(r.value for r in recs)
        if cond():
            return True
    return False


def _consumer(c, gid, **kw):
    from kcodec.client import Consumer

    con = Consumer(bootstrap_servers=c.bootstrap, group_id=gid, group_protocol="consumer",
                   auto_offset_reset="earliest", **kw)
    con.subscribe(["t"])
    return con


def _describe_and_list_over_the_wire(c, gid, *consumers) -> None:
    from kcodec.client import Admin
    from tests.support.broker_raw import Raw

    raw = Raw(c.bootstrap)
    try:
        (g,) = raw.call(DReq(group_ids=[gid]), 0).groups
    finally:
        raw.close()
    assert g.error_code == 0 and g.group_state == "Stable" and g.assignor_name == "uniform"
    assert g.group_epoch == g.assignment_epoch == max(m.member_epoch for m in g.members)
    got = sorted((tp.topic_name, p) for m in g.members for tp in m.assignment.topic_partitions
                 for p in tp.partitions)
    assert got == sorted(tuple(tp) for con in consumers for tp in con.assignment())
    with Admin(bootstrap_servers=c.bootstrap) as admin:
        assert [(x.group_id, x.state) for x in admin.list_groups()] == [(gid, "Stable")]


def test_kcodec_consumers_share_and_rebalance_on_join_and_leave() -> None:
    from kcodec.client import Producer

    with Cluster(1) as c:
        c.consumer_groups.heartbeat_interval_ms = 100
        c.create_topic("t", 4)
        with Producer(bootstrap_servers=c.bootstrap) as p:
            for i in range(40):
                p.send("t", value=b"%d" % i, partition=i % 4)
            p.flush()
        first = _consumer(c, "kg")
        seen: list[bytes] = []
        assert _poll_until([first], lambda: len(first.assignment()) == 4, seen)
        second = _consumer(c, "kg")
        assert _poll_until([first, second], lambda: (
            len(first.assignment()) == 2 and len(second.assignment()) == 2), seen)
        assert not set(first.assignment()) & set(second.assignment())
        desc = c.consumer_groups.describe("kg")
        assert desc.state == "Stable" and len(desc.members) == 2
        _describe_and_list_over_the_wire(c, "kg", first, second)
        second.close()                                    # leave: first gets all back
        assert _poll_until([first], lambda: len(first.assignment()) == 4, seen)
        _poll_until([first], lambda: len(set(seen)) == 40, seen, timeout=10)
        assert sorted(set(seen)) == sorted(b"%d" % i for i in range(40))   # none lost
        first.close()
        assert c.consumer_groups.describe("kg").members == {}


# ---------------------------------------------------------------------- the generator
@pytest.mark.reference("specs-latest")
@pytest.mark.slow
def test_generator_keeps_modules_without_a_spec_but_does_not_check_them(tmp_path) -> None:
    import shutil
    import subprocess
    import sys

    from tests.support import REPO as ROOT
    from tests.support.reference import latest_specs_dir

    out = tmp_path / "messages"
    shutil.copytree(ROOT / "kcodec/protocol/messages", out)
    # a copy of the specs that predates KIP-848: no ConsumerGroup* files
    specs = tmp_path / "specs"
    shutil.copytree(latest_specs_dir(), specs)
    for p in specs.glob("ConsumerGroup*.json"):
        p.unlink()

    def gen(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tools.gen_protocol", "--specs",
                               str(specs), "--out", str(out), *args],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
    r = gen("--check")
    assert r.returncode == 0, r.stderr
    assert "consumer_group_heartbeat.py has no spec" in r.stderr
    # a module that does not carry the generated header is still drift
    (out / "consumer_group_describe.py").write_text("x = 1\n")
    r = gen("--check")
    assert r.returncode == 1 and "consumer_group_describe.py is not generated" in r.stderr
    assert gen("--prune").returncode == 0
    assert not (out / "consumer_group_heartbeat.py").exists()
    assert "consumer_group" not in (out / "__init__.py").read_text()


@pytest.mark.peers
def test_confluent_kafka_consumer_protocol_shares_a_group_with_kcodec() -> None:
    import confluent_kafka as ck

    from kcodec.client import Producer

    with Cluster(1) as c:
        c.consumer_groups.heartbeat_interval_ms = 200
        c.create_topic("t", 4)
        with Producer(bootstrap_servers=c.bootstrap) as p:
            for i in range(40):
                p.send("t", value=b"%d" % i, partition=i % 4)
        peer = ck.Consumer({"bootstrap.servers": c.bootstrap, "group.id": "mixed",
                            "group.protocol": "consumer", "auto.offset.reset": "earliest"})
        peer.subscribe(["t"])
        seen: list[bytes] = []

        def poll_peer() -> None:
            m = peer.poll(0.05)
            if m is not None and m.error() is None:
                seen.append(m.value())
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(peer.assignment()) != 4:
            poll_peer()
        assert len(peer.assignment()) == 4          # librdkafka applied the broker's assignment
        ours = _consumer(c, "mixed")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
                len(peer.assignment()) == 2 and len(ours.assignment()) == 2):
            poll_peer()
            for recs in ours.poll(0.05).values():
                seen.extend(r.value for r in recs)
        assert len(peer.assignment()) == 2 and len(ours.assignment()) == 2
        theirs = {(tp.topic, tp.partition) for tp in peer.assignment()}
        assert not theirs & {tuple(tp) for tp in ours.assignment()}
        g = c.consumer_groups.describe("mixed")
        assert g.state == "Stable" and len(g.members) == 2
        peer.close()                                  # librdkafka leaves: ours gets all four
        assert _poll_until([ours], lambda: len(ours.assignment()) == 4, seen)
        _poll_until([ours], lambda: len(set(seen)) == 40, seen, timeout=10)
        assert sorted(set(seen)) == sorted(b"%d" % i for i in range(40))
        ours.close()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_mixed_group_classic_member_joins_a_consumer_protocol_group(strategy) -> None:
    from kcodec.client import Consumer, Producer

    with Cluster(1) as c:
        c.consumer_groups.heartbeat_interval_ms = 100
        c.create_topic("t", 4)
        with Producer(bootstrap_servers=c.bootstrap) as p:
            for i in range(40):
                p.send("t", value=b"%d" % i, partition=i % 4)
        new = _consumer(c, "mix")
        seen: list[bytes] = []
        assert _poll_until([new], lambda: len(new.assignment()) == 4, seen)
        old = Consumer(bootstrap_servers=c.bootstrap, group_id="mix", auto_offset_reset="earliest",
                       heartbeat_interval_ms=100, partition_assignment_strategy=strategy,
                       group_protocol="classic")
        old.subscribe(["t"])
        assert _poll_until([new, old], lambda: (
            len(new.assignment()) == 2 and len(old.assignment()) == 2), seen)
        assert not set(new.assignment()) & set(old.assignment())
        g = c.consumer_groups.describe("mix")
        assert sorted(m.classic for m in g.members.values()) == [False, True]
        assert g.state == "Stable"
        # as Kafka 4: the classic API does not describe it, ConsumerGroupDescribe does
        from kcodec.client import Admin
        from tests.support.broker_raw import Raw

        DG = CLASSES["DescribeGroupsRequest"]
        with Raw(c.bootstrap) as raw:
            (dg,) = raw.call(DG(groups=["mix"], include_authorized_operations=False), 5).groups
        assert (dg.error_code, dg.group_state, dg.members) == (0, "Dead", [])
        with Admin(bootstrap_servers=c.bootstrap) as admin:
            (d,) = admin.describe_groups(["mix"])
        assert (d.type, d.state, len(d.members)) == ("consumer", "Stable", 2)
        assert sorted(tuple(p for p in m.assignment["t"]) for m in d.members) == sorted(
            tuple(sorted(tp.partition for tp in con.assignment())) for con in (new, old))
        new.close()                                   # the classic member gets all four
        assert _poll_until([old], lambda: len(old.assignment()) == 4, seen)
        # the last consumer-protocol member left: the group went back to the classic protocol
        assert c.consumer_groups.describe("mix") is None
        assert len(c.groups.groups["mix"].members) == 1
        _poll_until([old], lambda: len(set(seen)) == 40, seen, timeout=10)
        assert sorted(set(seen)) == sorted(b"%d" % i for i in range(40))
        old.close()
        assert not c.groups.groups["mix"].members


@pytest.mark.peers
def test_mixed_group_with_a_classic_confluent_kafka_member() -> None:
    import confluent_kafka as ck

    from kcodec.client import Producer

    with Cluster(1) as c:
        c.consumer_groups.heartbeat_interval_ms = 100
        c.create_topic("t", 4)
        with Producer(bootstrap_servers=c.bootstrap) as p:
            for i in range(40):
                p.send("t", value=b"%d" % i, partition=i % 4)
        new = _consumer(c, "mixck")
        seen: list[bytes] = []
        assert _poll_until([new], lambda: len(new.assignment()) == 4, seen)
        old = ck.Consumer({"bootstrap.servers": c.bootstrap, "group.id": "mixck",
                           "auto.offset.reset": "earliest", "heartbeat.interval.ms": 200,
                           "partition.assignment.strategy": "range"})
        old.subscribe(["t"])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
                len(new.assignment()) == 2 and len(old.assignment()) == 2):
            m = old.poll(0.05)
            if m is not None and m.error() is None:
                seen.append(m.value())
            for recs in new.poll(0.05).values():
                seen.extend(r.value for r in recs)
        assert len(new.assignment()) == 2 and len(old.assignment()) == 2
        theirs = {(tp.topic, tp.partition) for tp in old.assignment()}
        assert not theirs & {tuple(tp) for tp in new.assignment()}
        old.close()                                  # LeaveGroup: ours gets all four again
        assert _poll_until([new], lambda: len(new.assignment()) == 4, seen)
        _poll_until([new], lambda: len(set(seen)) == 40, seen, timeout=10)
        assert sorted(set(seen)) == sorted(b"%d" % i for i in range(40))
        new.close()


@pytest.mark.slow
def test_a_silent_member_is_removed_after_the_session_timeout() -> None:
    with Cluster(1) as c:
        c.consumer_groups.heartbeat_interval_ms = 100
        c.consumer_groups.session_timeout_ms = 1500
        c.create_topic("t", 4)
        a, b = _consumer(c, "st"), _consumer(c, "st")
        seen: list[bytes] = []
        assert _poll_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 2, seen)
        b._loop.run(b._engine.abort(), 5)      # a crash: no leave, no more heartbeats
        started = time.monotonic()
        assert _poll_until([a], lambda: len(a.assignment()) == 4, seen)
        assert time.monotonic() - started >= 1.0   # not before the session timed out
        assert len(c.consumer_groups.describe("st").members) == 1
        a.close()


def test_a_commit_at_the_previous_epoch_covers_only_what_the_member_still_owns(coord) -> None:
    # a commit sent before a revocation, answered after it: the partition's new owner may
    # have committed further already, so the old epoch must not move it back
    _, _, _, ea, _ = hb(coord, "a", 0, ["t"], {})
    _, _, _, eb, _ = hb(coord, "b", 0, ["t"], {})
    _, _, _, ea2, got = hb(coord, "a", ea, None, {"t": {0, 1, 2, 3}})
    kept = set(got["t"])
    _, _, _, ea3, _ = hb(coord, "a", ea2, None, {"t": kept})      # revoked: a's epoch moves on
    assert ea3 > ea2
    gone = ({0, 1, 2, 3} - kept).pop()
    assert coord.check_commit("g", "a", ea2, [("t", p) for p in kept]) == 0
    assert coord.check_commit("g", "a", ea2, [("t", gone)]) == E.STALE_MEMBER_EPOCH
    assert coord.check_commit("g", "a", ea3, [("t", p) for p in kept]) == 0
    # at the current epoch too: a partition the member does not own is not its to commit
    assert coord.check_commit("g", "a", ea3, [("t", gone)]) == E.STALE_MEMBER_EPOCH


def test_a_full_heartbeat_is_answered_with_the_whole_assignment(coord) -> None:
    # b's answer with its partitions is lost on the way: the coordinator took them as sent,
    # so an ordinary heartbeat says nothing new; the full request b sends after the failure
    # (subscription and owned partitions) gets the assignment again
    _, _, _, ea, _ = hb(coord, "a", 0, ["t"], {})
    _, _, _, eb, got = hb(coord, "b", 0, ["t"], {})
    assert got == {}
    _, _, _, ea2, got = hb(coord, "a", ea, None, {"t": {0, 1, 2, 3}})
    hb(coord, "a", ea2, None, {"t": set(got["t"])})                # a revoked two
    _, _, _, eb2, lost = hb(coord, "b", eb, None, None)
    assert len(lost["t"]) == 2                                      # this answer is lost
    assert hb(coord, "b", eb, None, None)[4] is None                # nothing changed since
    code, _, _, eb3, again = hb(coord, "b", eb, ["t"], {})          # the full request
    assert code == 0 and eb3 == eb2 and again == lost
    # a full request from a member still giving partitions up (it reports them) keeps
    # them revoking: they go to their new owner only once reported gone
    hb(coord, "c", 0, ["t"], {})                     # c joins: a or b gives one up
    members = coord.groups["g"].members
    for mid in ("a", "b"):
        hb(coord, mid, members[mid].epoch, None, None)
    (giver,) = [m for m in (members["a"], members["b"]) if m.state == "UNREVOKED_PARTITIONS"]
    holds = {"t": giver.assigned.get("t", set()) | giver.revoking["t"]}
    assert hb(coord, giver.member_id, giver.epoch, ["t"], holds)[0] == 0
    assert giver.state == "UNREVOKED_PARTITIONS" and giver.revoking


@pytest.mark.slow
def test_a_member_whose_heartbeat_answer_was_lost_still_gets_its_partitions() -> None:
    # the answer carrying a member's first partitions times out (a one-way partition, a
    # reset): the member must not wait forever for an assignment the coordinator thinks it sent
    from kcodec.client.errors import KafkaTimeoutError
    from kcodec.protocol import ApiKey

    with Cluster(1) as c:
        c.consumer_groups.heartbeat_interval_ms = 100
        c.create_topic("t", 4)
        a = _consumer(c, "lost")
        seen: list[bytes] = []
        assert _poll_until([a], lambda: len(a.assignment()) == 4, seen)
        b = _consumer(c, "lost")
        cluster = b._engine.group.cluster
        real = cluster.request
        dropped: list[object] = []

        async def request(node, req, *args, **kw):
            resp = await real(node, req, *args, **kw)
            asg = getattr(resp, "assignment", None)
            if (req.API_KEY == ApiKey.CONSUMER_GROUP_HEARTBEAT and not dropped and asg is not None
                    and any(tp.partitions for tp in asg.topic_partitions)):
                dropped.append(asg)
                raise KafkaTimeoutError("the answer was lost on the way (test)")
            return resp

        cluster.request = request
        assert _poll_until([a, b], lambda: len(a.assignment()) == len(b.assignment()) == 2,
                           seen, timeout=15)
        assert dropped, "no heartbeat answer was dropped: the test proved nothing"
        assert not set(a.assignment()) & set(b.assignment())
        a.close()
        b.close()


# ---------------------------------------------------------------------- a member that lost them
def test_a_member_that_owns_none_of_what_it_must_give_up_moves_on_at_once(coord) -> None:
    # a got all four, then lost them (a broker restart fenced it, say) before b joined; its
    # heartbeat says it owns nothing: waiting for it to give two up would wait for a report
    # it has made, and hold those two from b until the rebalance timeout (Kafka's
    # coordinator revokes only what the member may still own)
    _, _, _, ea, got = hb(coord, "a", 0, ["t"], {})
    assert got == {"t": {0, 1, 2, 3}}
    _, _, _, eb, _ = hb(coord, "b", 0, ["t"], {})
    _, _, _, ea2, got = hb(coord, "a", ea, None, {})
    a = coord.groups["g"].members["a"]
    assert ea2 == eb and a.state == "STABLE" and not a.revoking and len(got["t"]) == 2
    _, _, _, _, got = hb(coord, "b", eb, None, {})
    assert got == {"t": {0, 1, 2, 3} - a.assigned["t"]}
    assert coord.groups["g"].state == "Stable"


class _Coordinator:
    """The client's coordinator channel wired to the broker's coordinator in-process: the
    heartbeats a member sends, as the broker gets them."""

    known = True

    def __init__(self, coord: ConsumerGroupCoordinator, topics: dict[str, uuid.UUID]) -> None:
        self.coord, self.names = coord, {i: n for n, i in topics.items()}
        self.sent: list = []

    async def request(self, req, timeout=None):
        from types import SimpleNamespace as NS
        self.sent.append(req)
        owned = None if req.topic_partitions is None else {
            self.names[tp.topic_id]: set(tp.partitions) for tp in req.topic_partitions}
        code, msg, mid, epoch, out = self.coord.heartbeat(
            req.group_id, req.member_id, req.member_epoch, instance_id=None, rack_id=None,
            rebalance_timeout_ms=req.rebalance_timeout_ms, topics=req.subscribed_topic_names,
            assignor=None, owned=owned, client_id="c", client_host="/h")
        ids = {n: i for i, n in self.names.items()}
        asg = None if out is None else NS(topic_partitions=[
            NS(topic_id=ids[t], partitions=sorted(ps)) for t, ps in out.items()])
        return NS(error_code=code, error_message=msg, member_id=mid, member_epoch=epoch,
                  heartbeat_interval_ms=50, assignment=asg)

    def forget(self) -> None:
        pass


def test_a_member_reports_what_its_join_gave_it_and_joins_owning_nothing(coord) -> None:
    # the join's heartbeat goes out before the assignment it brings is taken, so the
    # coordinator has not heard what the member holds after it: the next heartbeat says it
    # (else a coordinator waiting for a give-up it cannot see waits for ever). And a member
    # joining at epoch 0 reports nothing owned, whatever it held before it was fenced
    import asyncio
    from types import SimpleNamespace as NS

    from kcodec.client.config import ConsumerConfig
    from kcodec.client.consumer.consumer_group import ConsumerGroupMember
    from kcodec.client.structs import TopicPartition

    tid = coord.state.topics["t"].topic_id
    cluster = NS(topics={"t": NS(topic_id=tid)}, topic_names={tid: "t"})
    chan = _Coordinator(coord, {"t": tid})

    async def run() -> None:
        m = ConsumerGroupMember(cluster, ConsumerConfig(group_id="g", group_protocol="consumer",
                                                        heartbeat_interval_ms=50))
        m.coordinator = chan
        # the heartbeat loop was fenced while the poll thread began a join with what it held
        m.lost = True
        assert await m.join(["t"], {TopicPartition("t", 3)}) is None   # lost: say so first
        assert chan.sent[0].member_epoch == 0 and chan.sent[0].topic_partitions == []
        m.lost = False
        got = await m.join(["t"], set())      # the lost ones given up: join owning nothing
        assert got == {TopicPartition("t", p) for p in range(4)}
        joined = len(chan.sent)
        await asyncio.sleep(0.3)              # the heartbeat loop
        m.hb_task.cancel()
        reports = [r.topic_partitions for r in chan.sent[joined:] if r.topic_partitions is not None]
        assert reports and sorted(reports[0][0].partitions) == [0, 1, 2, 3], reports

    asyncio.run(run())
