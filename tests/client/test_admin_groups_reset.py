"""Admin.reset_consumer_group_offsets (kafka-consumer-groups --reset-offsets: the plan,
committed only with execute), Admin.delete_groups (classic and consumer-protocol groups)
and Admin.describe_topics, blocking and asyncio."""

from __future__ import annotations

import asyncio

import pytest

from kcodec.broker import Cluster
from kcodec.client import Admin, AsyncAdmin, Consumer, KafkaError, Producer, TopicPartition
from kcodec.errors import KcodecError

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


@pytest.fixture(scope="module")
def cluster():
    with Cluster(1) as c:
        c.create_topic("t", 2)
        with Producer(bootstrap_servers=c.bootstrap) as p:
            for part in (0, 1):
                for i in range(10):
                    p.send("t", b"%d" % i, partition=part)
            p.flush(10)
        yield c


def test_reset_plans_then_executes(cluster) -> None:
    with Admin(bootstrap_servers=cluster.bootstrap) as a:
        a.alter_consumer_group_offsets("r1", {T0: 4, T1: 8})
        plan = a.reset_consumer_group_offsets("r1", {"t": None}, shift_by=3)
        assert [(r.partition, r.current, r.new, r.error) for r in plan] == \
            [(0, 4, 7, None), (1, 8, 10, None)]               # clamped at the end
        assert a.committed_offsets("r1", ["t"]) == {T0: 4, T1: 8}   # a plan only
        a.reset_consumer_group_offsets("r1", {"t": [1]}, to_offset=-5, execute=True)
        assert a.committed_offsets("r1", ["t"]) == {T0: 4, T1: 0}  # clamped at the start
        plan = a.reset_consumer_group_offsets("r1", to_latest=True, execute=True)   # committed ones
        assert {(r.topic, r.partition, r.new) for r in plan} == {("t", 0, 10), ("t", 1, 10)}
        plan = a.reset_consumer_group_offsets("r1", {"t": [0]}, to_datetime=0, execute=True)
        assert plan[0].new == 0


def test_reset_needs_one_target_and_an_inactive_group(cluster) -> None:
    with Admin(bootstrap_servers=cluster.bootstrap) as a:
        with pytest.raises(ValueError, match="exactly one"):
            a.reset_consumer_group_offsets("r2", {"t": None})
        with pytest.raises(ValueError, match="exactly one"):
            a.reset_consumer_group_offsets("r2", {"t": None}, to_earliest=True, to_latest=True)
        with pytest.raises(KcodecError, match="no committed offset"):
            a.reset_consumer_group_offsets("r2", {"t": [0]}, shift_by=1)
        with pytest.raises(KafkaError):
            a.reset_consumer_group_offsets("r2", {"nosuch": None}, to_earliest=True)
        with Consumer("t", bootstrap_servers=cluster.bootstrap, group_id="r2-live") as c:
            while not c.assignment():
                c.poll(0.1)
            with pytest.raises(KcodecError, match="inactive"):
                a.reset_consumer_group_offsets("r2-live", {"t": None}, to_earliest=True)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_delete_groups(cluster, protocol) -> None:
    gid = f"d-{protocol}"
    with Admin(bootstrap_servers=cluster.bootstrap) as a:
        with Consumer("t", bootstrap_servers=cluster.bootstrap, group_id=gid,
                      group_protocol=protocol, enable_auto_commit=False,
                      auto_offset_reset="earliest") as c:
            while not c.poll(0.1):
                pass
            c.commit()
            refused = a.delete_groups([gid])[gid]
            assert refused is not None and refused.name == "NON_EMPTY_GROUP"
        got = a.delete_groups([gid, gid + "x"])
        assert got[gid] is None
        assert got[gid + "x"] is not None and got[gid + "x"].name == "GROUP_ID_NOT_FOUND"
        assert gid not in [g.group_id for g in a.list_groups()]
        assert a.committed_offsets(gid) == {}
        missing = a.delete_groups([gid])[gid]
        assert missing is not None and missing.name == "GROUP_ID_NOT_FOUND"


def test_the_async_admin_has_them_too(cluster) -> None:
    async def go() -> None:
        async with AsyncAdmin(bootstrap_servers=cluster.bootstrap) as a:
            [t] = await a.describe_topics(["t"])
            assert (t.name, [p.partition for p in t.partitions]) == ("t", [0, 1])
            await a.alter_consumer_group_offsets("r3", {T0: 2})
            plan = await a.reset_consumer_group_offsets("r3", {"t": [0]}, to_earliest=True,
                                                        execute=True)
            assert [(r.current, r.new, r.error) for r in plan] == [(2, 0, None)]
            assert (await a.delete_groups(["r3"])) == {"r3": None}
    asyncio.run(go())
