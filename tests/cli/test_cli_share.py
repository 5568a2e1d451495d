"""``kcodec consume --share-group``: several consumers of one share group split a
partition's records, each printed once; ``describe-groups`` and ``groups list`` show the
share group."""

from __future__ import annotations

import json

import pytest

from kcodec.client import Admin, Producer, TopicPartition
from tests.cli.harness import create, finish, kcodec, run


def earliest(bootstrap: str, group: str) -> None:
    """share.auto.offset.reset=earliest on the group (IncrementalAlterConfigs, GROUP)."""
    import confluent_kafka.admin as ca  # a peer: imported by the peers tests only

    admin = ca.AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    r = ca.ConfigResource(ca.ResourceType.GROUP, group, incremental_configs=[ca.ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=ca.AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([r]).values():
        f.result(10)


@pytest.mark.peers          # confluent-kafka sets the group config
def test_share_consumers_split_one_partition(kbroker, topic_name) -> None:
    create(kbroker, topic_name, 1)
    group = f"s-{topic_name}"
    earliest(kbroker.bootstrap, group)
    with Producer(bootstrap_servers=kbroker.bootstrap) as p:
        for i in range(600):
            p.send(topic_name, b"r%04d" % i, partition=0)
        p.flush()
    procs = [kcodec("consume", "-b", kbroker.bootstrap, "-t", topic_name, "--share-group",
                    group, "--idle", "3", "-q") for _ in range(3)]
    outs = [finish(p, 60) for p in procs]
    lines = [ln for out, _ in outs for ln in out.decode().splitlines()]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    assert sorted(lines) == [f"r{i:04d}" for i in range(600)]    # each once, all of them
    with Admin(bootstrap_servers=kbroker.bootstrap) as a:
        assert a.list_share_group_offsets(group) == {TopicPartition(topic_name, 0): 600}

    rc, out, err, _ = run("groups", "list", "-b", kbroker.bootstrap, "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    assert {"group": group, "type": "share", "state": "Empty", "protocol_type": "share"} in rows
    rc, out, err, _ = run("describe-groups", "-b", kbroker.bootstrap, "-g", group, "--json")
    assert rc == 0, err
    (d,) = [json.loads(x) for x in out.splitlines()]
    assert (d["type"], d["state"], d["protocol"]) == ("share", "Empty", "simple")
    assert d["start_offsets"] == [{"topic": topic_name, "partition": 0, "start_offset": 600,
                                   "end_offset": 600}]
    rc, out, err, _ = run("describe-groups", "-b", kbroker.bootstrap, "-g", group)
    assert rc == 0 and "START OFFSET" in out and "share" in out, out


def test_count_releases_what_it_did_not_print(kbroker, topic_name) -> None:
    """-n 3: three records printed and acknowledged; the others it fetched go back to the
    group at once (a second consumer gets them, delivered for the second time)."""
    create(kbroker, topic_name, 1)
    group = f"n-{topic_name}"
    with Admin(bootstrap_servers=kbroker.bootstrap) as a:
        with Producer(bootstrap_servers=kbroker.bootstrap) as p:
            for i in range(10):
                p.send(topic_name, b"r%d" % i, partition=0)
            p.flush()
        assert a.alter_share_group_offsets(group, {TopicPartition(topic_name, 0): 0}) == \
            {TopicPartition(topic_name, 0): None}
    rc, out, err, _ = run("consume", "-b", kbroker.bootstrap, "-t", topic_name,
                          "--share-group", group, "-n", "3", "-q")
    assert rc == 0, err
    assert out.splitlines() == ["r0", "r1", "r2"]
    rc, out, err, _ = run("consume", "-b", kbroker.bootstrap, "-t", topic_name,
                          "--share-group", group, "--idle", "2", "--format", "json", "-q")
    got = [json.loads(x) for x in out.splitlines()]
    assert [g["value"] for g in got] == [f"r{i}" for i in range(3, 10)]


def test_share_group_usage_errors(kbroker, topic_name) -> None:
    create(kbroker, topic_name, 1)
    for extra, says in ((["-g", "x"], "give a consumer group or a share group, not both"),
                        (["-o", "beginning"], "share.auto.offset.reset"),
                        (["-p", "0"], "the partitions the group assigns"),
                        (["-e"], "no end to reach")):
        rc, out, err, _ = run("consume", "-b", kbroker.bootstrap, "-t", topic_name,
                              "--share-group", "g", *extra)
        assert rc == 2 and says in err, err


def test_broker_share_configs_are_checked() -> None:
    rc, out, err, _ = run("broker", "--share-config", "group.share.nope=1", timeout=30)
    assert rc == 2 and "unknown share-group broker config 'group.share.nope'" in err
    rc, out, err, _ = run("broker", "--share-config", "group.share.delivery.count.limit",
                          timeout=30)
    assert rc == 2 and "give NAME=INTEGER" in err
