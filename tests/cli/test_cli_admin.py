"""The admin a user needs from the command line: ``topics describe``, ``groups delete`` and
``groups reset-offsets`` (Kafka's ``kafka-consumer-groups --reset-offsets``), and errors
that name what is missing instead of an empty table or a bare error code."""

from __future__ import annotations

import json

import pytest

from kcodec.client import Admin, Consumer, Producer, TopicPartition
from tests.cli.harness import create, run


def _fill(broker, topic: str, partitions: int, per: int) -> None:
    create(broker, topic, partitions)
    with Producer(bootstrap_servers=broker.bootstrap) as p:
        for part in range(partitions):
            for i in range(per):
                p.send(topic, b"%d" % i, partition=part)
        p.flush(10)


def _commit(broker, group: str, offsets: dict, protocol: str = "classic") -> None:
    with Consumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False,
                  group_protocol=protocol) as c:
        c.commit(offsets)


def test_topics_describe(kbroker) -> None:
    create(kbroker, "desc", 3)
    rc, out, err, _ = run("topics", "describe", "-b", kbroker.bootstrap, "desc")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"]
    assert [ln.split()[:2] for ln in lines[1:]] == [["desc", "0"], ["desc", "1"], ["desc", "2"]]
    rc, out, err, _ = run("topics", "describe", "-b", kbroker.bootstrap, "desc", "--json")
    assert [json.loads(x)["partition"] for x in out.splitlines()] == [0, 1, 2]


@pytest.mark.parametrize("action", ["describe", "list"])
def test_topics_of_a_missing_topic_is_an_error_with_a_near_name(kbroker, action) -> None:
    create(kbroker, f"events-{action}-a", 1)
    rc, out, err, _ = run("topics", action, "-b", kbroker.bootstrap, f"events-{action}-b")
    assert (rc, out) == (1, "")
    assert f"topic 'events-{action}-b' does not exist (did you mean 'events-{action}-a'?)" in err


def test_deleting_a_missing_topic_says_so(kbroker) -> None:
    rc, out, _, _ = run("topics", "delete", "-b", kbroker.bootstrap, "no-such-topic-x")
    assert rc == 1
    assert "no-such-topic-x: UNKNOWN_TOPIC_OR_PARTITION: no such topic" in out


def test_reset_offsets_dry_run_then_execute(kbroker) -> None:
    _fill(kbroker, "rst", 2, 10)
    _commit(kbroker, "rg", {TopicPartition("rst", 0): 7, TopicPartition("rst", 1): 3})
    base = ("groups", "reset-offsets", "-b", kbroker.bootstrap, "-g", "rg")
    rc, out, err, _ = run(*base, "-t", "rst", "--to-earliest")
    assert rc == 0, err
    assert "nothing was changed (a dry run)" in err
    rows = [ln.split() for ln in out.splitlines()[1:]]
    assert rows == [["rg", "rst", "0", "7", "0"], ["rg", "rst", "1", "3", "0"]]
    with Admin(bootstrap_servers=kbroker.bootstrap) as a:        # nothing committed yet
        assert a.committed_offsets("rg", ["rst"])[TopicPartition("rst", 0)] == 7
    rc, out, err, _ = run(*base, "-t", "rst:1", "--shift-by", "-5", "--execute", "--json")
    assert rc == 0, err
    assert [json.loads(x) for x in out.splitlines()] == [
        {"group": "rg", "topic": "rst", "partition": 1, "current_offset": 3, "new_offset": 0,
         "committed": True, "error": None}]                         # clamped at the earliest
    rc, out, err, _ = run(*base, "--all-topics", "--to-offset", "99", "--execute")
    assert rc == 0, err
    with Admin(bootstrap_servers=kbroker.bootstrap) as a:
        got = a.committed_offsets("rg", ["rst"])
    assert got == {TopicPartition("rst", 0): 10, TopicPartition("rst", 1): 10}   # the end


def test_reset_offsets_to_datetime_and_latest(kbroker) -> None:
    _fill(kbroker, "rst-t", 1, 4)
    base = ("groups", "reset-offsets", "-b", kbroker.bootstrap, "-g", "rt", "-t", "rst-t")
    rc, out, err, _ = run(*base, "--to-datetime", "2000-01-01T00:00:00Z", "--execute")
    assert rc == 0, err
    assert out.splitlines()[1].split() == ["rt", "rst-t", "0", "-", "0"]
    rc, out, err, _ = run(*base, "--to-datetime", "2999-01-01T00:00:00", "--execute")
    assert out.splitlines()[1].split()[-1] == "4"                   # none after it: the end
    rc, out, err, _ = run(*base, "--to-latest", "--dry-run")
    assert rc == 0 and "dry run" not in err                          # asked for: no notice


@pytest.mark.parametrize("argv,said", [
    (["-t", "rst-u", "--to-earliest", "--to-latest"], "not allowed with argument"),
    (["-t", "rst-u"], "one of the arguments"),
    (["--to-earliest"], "-t TOPIC[:P,...] (repeatable) or --all-topics"),
    (["-t", "rst-u:x", "--to-earliest"], "partitions are numbers"),
    (["-t", "rst-u", "--to-datetime", "yesterday"], "--to-datetime 'yesterday'"),
])
def test_reset_offsets_usage_errors(kbroker, argv, said) -> None:
    rc, out, err, _ = run("groups", "reset-offsets", "-b", kbroker.bootstrap, "-g", "x", *argv)
    assert (rc, out) == (2, ""), err
    assert said in err


def test_reset_offsets_refuses_an_active_group_and_names_missing_parts(kbroker) -> None:
    _fill(kbroker, "rst-a", 1, 3)
    base = ("groups", "reset-offsets", "-b", kbroker.bootstrap)
    rc, _, err, _ = run(*base, "-g", "ra", "-t", "rst-a:5", "--to-earliest")
    assert rc == 1 and "topic 'rst-a' has partitions 0..0: no partition 5" in err
    rc, _, err, _ = run(*base, "-g", "ra", "-t", "rst-zzz", "--to-earliest")
    assert rc == 1 and "topic 'rst-zzz' does not exist" in err
    rc, _, err, _ = run(*base, "-g", "ra", "-t", "rst-a", "--shift-by", "1")
    assert rc == 1 and "no committed offset" in err
    with Consumer("rst-a", bootstrap_servers=kbroker.bootstrap, group_id="ra-live",
                  session_timeout_ms=10000, heartbeat_interval_ms=500) as c:
        while not c.assignment():
            c.poll(0.2)
        rc, _, err, _ = run(*base, "-g", "ra-live", "-t", "rst-a", "--to-earliest")
    assert rc == 1 and "can only be reset while it is inactive" in err


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_groups_delete(kbroker, protocol) -> None:
    _fill(kbroker, f"gd-{protocol}", 1, 2)
    with Consumer(f"gd-{protocol}", bootstrap_servers=kbroker.bootstrap, group_id=f"gd-{protocol}",
                  group_protocol=protocol, enable_auto_commit=False,
                  auto_offset_reset="earliest") as c:
        while not c.poll(0.2):
            pass
        c.commit()
        rc, out, _, _ = run("groups", "delete", "-b", kbroker.bootstrap, f"gd-{protocol}")
        assert rc == 1 and "NON_EMPTY_GROUP: it has members" in out     # a live member
    rc, out, err, _ = run("groups", "delete", "-b", kbroker.bootstrap, f"gd-{protocol}")
    assert (rc, out) == (0, f"gd-{protocol}: deleted\n"), err
    with Admin(bootstrap_servers=kbroker.bootstrap) as a:
        assert f"gd-{protocol}" not in [g.group_id for g in a.list_groups()]
        assert a.committed_offsets(f"gd-{protocol}") == {}
    rc, out, _, _ = run("groups", "delete", "-b", kbroker.bootstrap, f"gd-{protocol}x")
    assert rc == 1 and f"gd-{protocol}x: GROUP_ID_NOT_FOUND: no such group" in out
