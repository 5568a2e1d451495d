"""A topic is created whole or not at all: a create that would pass the node's descriptor
budget is refused up front with a clear error, a create that fails half-way (out of
descriptors, a full disk) leaves nothing, and one cut short by a crash is removed at the
next start instead of being served with part of its partitions."""

from __future__ import annotations

import errno
import os

import pytest

from kcodec.broker import Cluster
from kcodec.broker.log import LogConfig, LogManager, manager
from kcodec.broker.log.errors import DescriptorBudgetError
from kcodec.broker.log.files import SEGMENT_FILES
from kcodec.broker.state import ClusterState
from kcodec.client import Admin
from kcodec.client.admin import NewTopic


def _dirs(root, topic: str) -> list[str]:
    logs = os.path.join(root, "logs")
    return sorted(n for n in os.listdir(logs) if n.startswith(topic + "-")) \
        if os.path.isdir(logs) else []


def test_a_create_past_the_descriptor_budget_is_refused(tmp_path, monkeypatch):
    # a segment file cache as big as a high limit makes (10,000): its free places count
    monkeypatch.setattr(SEGMENT_FILES, "capacity", 10_000)
    monkeypatch.setattr(manager, "descriptor_budget", lambda: (4096, 200))
    with Cluster(1, data_dir=tmp_path) as c:
        with Admin(bootstrap_servers=c.bootstrap) as admin:
            err = admin.create_topics([NewTopic("wide", 1000)])["wide"]
            assert err is not None and "POLICY_VIOLATION" in str(err)
            assert "file descriptors" in str(err), str(err)
            assert "wide" not in c.state.topics and _dirs(tmp_path, "wide") == []
            admin.create_topics([NewTopic("narrow", 10)])          # within it: made
            assert len(c.state.topics["narrow"].partitions) == 10


def test_the_budget_message(monkeypatch):
    monkeypatch.setattr(SEGMENT_FILES, "capacity", 10_000)
    logs = LogManager("/nonexistent-data-dir")
    manager_budget = manager.descriptor_budget
    try:
        manager.descriptor_budget = lambda: (4096, 200)
        with pytest.raises(DescriptorBudgetError) as err:
            logs.check_descriptors(1000)
        assert str(err.value) == (
            "1000 partition(s) need 3000 file descriptors, and only 2872 of the node's limit "
            "of 4096 are left (200 open, 1024 kept for connections): raise the limit "
            "(ulimit -n) or create fewer partitions")
        logs.check_descriptors(900)
    finally:
        manager.descriptor_budget = manager_budget


def test_a_create_failing_half_way_leaves_nothing(tmp_path, monkeypatch):
    state = ClusterState(tmp_path)
    state.open()
    try:
        real = state.logs.create
        made = []

        def create(topic, partition, cfg):
            if partition == 5:
                raise OSError(errno.EMFILE, "Too many open files")
            made.append(partition)
            return real(topic, partition, cfg)
        monkeypatch.setattr(state.logs, "create", create)
        fds = len(os.listdir("/proc/self/fd"))
        with pytest.raises(OSError):
            state.create_topic("half", 10)
        assert made == [0, 1, 2, 3, 4]
        assert "half" not in state.topics and _dirs(tmp_path, "half") == []
        assert state.logs.get("half", 0) is None
        assert len(os.listdir("/proc/self/fd")) <= fds
    finally:
        state.close()
    state = ClusterState(tmp_path)
    state.open()
    try:
        assert "half" not in state.topics
    finally:
        state.close()


def test_a_create_cut_by_a_crash_is_removed_at_the_next_start(tmp_path):
    state = ClusterState(tmp_path)
    state.open()
    state.create_topic("whole", 2)
    # what a crash in the middle of creating "half" leaves: its name marked as being
    # created in the metadata, 3 of its 10 partitions on disk
    state._creating.add("half")
    state.save()
    for i in range(3):
        state.logs.create("half", i, LogConfig())
    state.logs.close()
    state._unlock()
    assert len(_dirs(tmp_path, "half")) == 3
    again = ClusterState(tmp_path)
    again.open()
    try:
        assert "half" not in again.topics and _dirs(tmp_path, "half") == []
        assert len(again.topics["whole"].partitions) == 2
    finally:
        again.close()


def test_create_partitions_failing_half_way_adds_none(tmp_path, monkeypatch):
    """An OSError half-way through CreatePartitions (out of descriptors) is answered
    KAFKA_STORAGE_ERROR, as CreateTopics answers it, and leaves the topic as it was: in
    memory, on disk and after a restart."""
    from kcodec.protocol import CreatePartitionsRequest as P
    from kcodec.protocol import ErrorCode
    from tests.support.broker_raw import Raw

    with Cluster(1, data_dir=tmp_path) as c:
        c.create_topic("grow", 2)
        real = c.state.logs.create

        def create(topic, partition, cfg=None):
            if topic == "grow" and partition == 5:
                raise OSError(errno.EMFILE, "Too many open files")
            return real(topic, partition, cfg)
        monkeypatch.setattr(c.state.logs, "create", create)
        with Raw(c.bootstrap) as raw:
            r = raw.call(P(topics=[P.CreatePartitionsTopic(name="grow", count=10)],
                           timeout_ms=5000), 3)
        assert r.results[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR, r
        assert "Too many open files" in r.results[0].error_message
        assert sorted(c.state.topics["grow"].partitions) == [0, 1]
        assert c.state.logs.get("grow", 2) is None
        assert _dirs(tmp_path, "grow") == ["grow-0", "grow-1"]
        monkeypatch.undo()
        with Raw(c.bootstrap) as raw:      # the same grow, now possible, is made whole
            r = raw.call(P(topics=[P.CreatePartitionsTopic(name="grow", count=4)],
                           timeout_ms=5000), 3)
        assert r.results[0].error_code == 0
        assert sorted(c.state.topics["grow"].partitions) == [0, 1, 2, 3]
    with Cluster(1, data_dir=tmp_path) as c:
        assert sorted(c.state.topics["grow"].partitions) == [0, 1, 2, 3]


def test_create_partitions_cut_by_a_crash_is_removed_at_the_next_start(tmp_path, monkeypatch):
    """A crash half-way through adding partitions (the process dies: nothing after the
    failing call runs) leaves the old count: the next start removes the new partitions."""
    state = ClusterState(tmp_path)
    state.open()
    state.create_topic("grow", 2)
    state.create_topic("other", 3)
    real = state.logs.create

    class Crash(BaseException):
        pass

    def create(topic, partition, cfg=None):
        if partition == 6:
            raise Crash
        return real(topic, partition, cfg)
    monkeypatch.setattr(state.logs, "create", create)
    # the crash: the rollback never runs, so keep it from running here either
    monkeypatch.setattr(state.logs, "delete_partitions", lambda *a: None)
    monkeypatch.setattr(state, "save", lambda real_save=state.save: (
        None if "grow" not in state._growing else real_save()))
    with pytest.raises(Crash):
        state.add_partitions("grow", 10)
    state.logs.close()
    state._unlock()
    assert len(_dirs(tmp_path, "grow")) == 6          # partitions 2..5 made, then the crash
    again = ClusterState(tmp_path)
    again.open()
    try:
        assert sorted(again.topics["grow"].partitions) == [0, 1]
        assert _dirs(tmp_path, "grow") == ["grow-0", "grow-1"]
        assert len(again.topics["other"].partitions) == 3
        again.add_partitions("grow", 3)                # and it grows again as it should
        assert sorted(again.topics["grow"].partitions) == [0, 1, 2]
    finally:
        again.close()
    again = ClusterState(tmp_path)
    again.open()
    try:
        assert sorted(again.topics["grow"].partitions) == [0, 1, 2]
    finally:
        again.close()
