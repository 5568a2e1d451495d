"""``lag``, ``offsets`` and ``describe-groups`` agree on a group's partitions: those its
members are assigned and those it committed offsets for. A busy group that has not
committed yet said ``lag 0 (0 partitions)`` while describe-groups showed it Stable with 4
partitions, and a topic the group never read said ``lag 1``."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from kcodec.client import Consumer, Producer, TopicPartition
from tests.cli.harness import create, run


@pytest.fixture
def busy(kbroker, topic_name) -> Iterator[tuple[str, str, str, Callable[[dict], None]]]:
    """A group with one live member that owns the 4 partitions of ``topic_name`` and has
    committed nothing; 10 records in partition 3, 5 in partition 0; ``topic_name-other``
    holds 1 record the group never read."""
    topic, other, group = topic_name, topic_name + "-other", f"g-{topic_name}"
    create(kbroker, topic, 4)
    create(kbroker, other, 1)
    with Producer(bootstrap_servers=kbroker.bootstrap, linger_ms=0) as p:
        for i in range(10):
            p.send(topic, b"%d" % i, partition=3).result(10)
        for i in range(5):
            p.send(topic, b"%d" % i, partition=0).result(10)
        p.send(other, b"x", partition=0).result(10)
    c = Consumer(topic, bootstrap_servers=kbroker.bootstrap, group_id=group,
                 enable_auto_commit=False, auto_offset_reset="earliest",
                 session_timeout_ms=6000, heartbeat_interval_ms=500, fetch_max_wait_ms=50)
    lock = threading.Lock()
    stop = threading.Event()

    def poll() -> None:      # a member that keeps polling (its heartbeats keep it in)
        while not stop.is_set():
            with lock:
                c.poll(0.1)
            time.sleep(0.01)
    t = threading.Thread(target=poll, daemon=True)
    t.start()
    deadline = time.monotonic() + 20
    while len(c.assignment()) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(c.assignment()) == 4

    def commit(offsets: dict) -> None:   # between two polls
        with lock:
            c.commit(offsets)
    yield kbroker.bootstrap, topic, group, commit
    stop.set()
    t.join(10)
    c.close()


def test_a_busy_group_that_has_not_committed(busy) -> None:
    bootstrap, topic, group, _ = busy
    b = ("-b", bootstrap)
    rc, out, err, _ = run("describe-groups", *b, "-g", group)
    assert rc == 0 and out.splitlines()[1].split()[:2] == [group, "Stable"], err
    assert out.splitlines()[-1].split()[-2:] == [topic, "0,1,2,3"]
    rc, out, err, _ = run("lag", *b, "-g", group)
    assert (rc, out.strip()) == (0, f"{group}: no committed offsets yet (4 partitions, end "
                                    "offsets total 15)"), err
    rc, out, _, _ = run("lag", *b, "-g", group, "--json")
    assert json.loads(out) == {"group": group, "lag": None, "partitions": 4,
                               "committed_partitions": 0, "uncommitted_partitions": 4,
                               "uncommitted_end_offsets": 15}
    rc, out, _, _ = run("offsets", *b, "-g", group)
    assert [line.split() for line in out.splitlines()[1:]] == [
        [topic, "0", "-", "5", "-"], [topic, "1", "-", "0", "-"],
        [topic, "2", "-", "0", "-"], [topic, "3", "-", "10", "-"]]
    rc, out, _, _ = run("offsets", *b, "-g", group, "--json")
    assert json.loads(out.splitlines()[0]) == {"topic": topic, "partition": 0, "committed": None,
                                               "end_offset": 5, "remaining": None}


def test_a_topic_the_group_never_read(busy) -> None:
    bootstrap, topic, group, _ = busy
    other = topic + "-other"
    rc, out, err, _ = run("lag", "-b", bootstrap, "-g", group, "-t", other)
    assert (rc, out.strip()) == (0, f"{group}: no partitions of {other!r}: no member is "
                                    "assigned one and nothing is committed"), err
    rc, out, _, _ = run("lag", "-b", bootstrap, "-g", group, "-t", other, "--json")
    assert json.loads(out) == {"group": group, "lag": None, "partitions": 0,
                               "committed_partitions": 0, "uncommitted_partitions": 0,
                               "uncommitted_end_offsets": None}
    rc, out, err, _ = run("offsets", "-b", bootstrap, "-g", group, "-t", other)
    assert (rc, out) == (0, "")
    assert err.strip() == (f"kcodec offsets: group {group!r}: no partitions of {other!r}: no "
                           "member is assigned one and nothing is committed")


def test_partly_then_fully_committed(busy) -> None:
    bootstrap, topic, group, commit = busy
    commit({TopicPartition(topic, 3): 4, TopicPartition(topic, 1): 0})
    rc, out, err, _ = run("lag", "-b", bootstrap, "-g", group)
    assert (rc, out.strip()) == (0, f"{group}: lag 6 (2 partitions); no committed offsets yet "
                                    "on 2 more (end offsets total 5)"), err
    rc, out, _, _ = run("lag", "-b", bootstrap, "-g", group, "--json")
    assert json.loads(out) == {"group": group, "lag": 6, "partitions": 4,
                               "committed_partitions": 2, "uncommitted_partitions": 2,
                               "uncommitted_end_offsets": 5}
    commit({TopicPartition(topic, p): o for p, o in ((0, 5), (2, 0), (3, 10))})
    rc, out, _, _ = run("lag", "-b", bootstrap, "-g", group)
    assert out.strip() == f"{group}: lag 0 (4 partitions)"


def test_committed_offsets_of_a_group_without_members(kbroker, topic_name) -> None:
    """No member: the partitions are those with committed offsets (partition 1, never
    committed, is not the group's)."""
    create(kbroker, topic_name, 2)
    group = f"g-{topic_name}"
    with Producer(bootstrap_servers=kbroker.bootstrap, linger_ms=0) as p:
        for i in range(3):
            p.send(topic_name, b"%d" % i, partition=1).result(10)
    with Consumer(bootstrap_servers=kbroker.bootstrap, group_id=group, enable_auto_commit=False) as c:
        c.assign([TopicPartition(topic_name, 0)])
        c.commit({TopicPartition(topic_name, 0): 0})
    rc, out, err, _ = run("lag", "-b", kbroker.bootstrap, "-g", group)
    assert (rc, out.strip()) == (0, f"{group}: lag 0 (1 partitions)"), err


def test_members_without_visible_assignments(monkeypatch, capsys) -> None:
    """A broker that describes members without their partitions (Tansu): lag says so
    rather than "no member is assigned one"."""
    from kcodec.cli import main
    from kcodec.client import Admin
    from kcodec.client.admin import GroupDescription, GroupListing, MemberDescription

    monkeypatch.setattr(Admin, "describe_groups", lambda self, ids: [GroupDescription(
        "g1", "Stable", "consumer", "", [MemberDescription("m-1", "", "", {}),
                                         MemberDescription("m-2", "", "", {})])])
    monkeypatch.setattr(Admin, "list_groups", lambda self: [GroupListing("g1", "consumer", "Stable")])
    monkeypatch.setattr(Admin, "committed_offsets", lambda self, g, topics=None: {})
    monkeypatch.setattr(Admin, "close", lambda self: None)
    rc = main(["lag", "-b", "127.0.0.1:1", "-g", "g1"])
    out, _ = capsys.readouterr()
    assert (rc, out.strip()) == (0, "g1: no committed offsets, and the broker's description of "
                                    "its 2 members names no partitions")
