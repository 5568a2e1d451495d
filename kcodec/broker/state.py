"""What every node of one in-process cluster shares: topics, partition replicas, the logs.

Each partition has a replica set (``replicas``, its replication factor's worth of node ids,
the preferred leader first, assigned round-robin over the nodes as Kafka assigns them) and a
leader among them, a label that the test controls can move. There is still one log per
partition (in the cluster's :class:`~kcodec.broker.log.LogManager`), shared by every replica:
a follower is always caught up, so its log end offset and high watermark are the leader's,
and the in-sync replicas are simply the replicas whose node is running. The leader serves
produce and ListOffsets; any replica serves a consumer's fetch (KIP-392). Topic metadata
(ids, partition counts, replica sets, configs set by users) is kept in ``topics.json`` next
to the logs, so a restart on the same data dir finds its topics again.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from kcodec.broker.coordinator.producers import ProducerState
from kcodec.broker.log import LogConfig, LogManager, PartitionLog
from kcodec.broker.log.errors import KafkaStorageError

__all__ = ["ClusterState", "Partition", "Topic", "now_ms"]


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Partition:
    topic: str
    index: int
    leader: int
    log: PartitionLog
    leader_epoch: int = 0
    #: the replica set, the preferred leader first (always holds ``leader``)
    replicas: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    producers: ProducerState = field(default_factory=ProducerState)

    def __post_init__(self) -> None:
        if not self.replicas:
            self.replicas = [self.leader]
        elif self.leader not in self.replicas:
            raise ValueError(f"leader {self.leader} of {self.topic}-{self.index} is not one of "
                             f"its replicas {self.replicas}")

    def isr(self, alive: set[int]) -> list[int]:
        """The in-sync replicas: every replica on a running node (they share the log)."""
        return [r for r in self.replicas if r in alive]


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    configs: dict[str, str]                       # configs set explicitly (not defaults)
    partitions: dict[int, Partition] = field(default_factory=dict)

    def log_config(self, defaults: dict[str, str] | None = None) -> LogConfig:
        """The topic's log settings: its own configs over ``defaults`` (the broker's topic
        defaults, by topic config name)."""
        return LogConfig.from_topic_configs({**(defaults or {}), **self.configs})


class ClusterState:
    def __init__(self, data_dir: str | os.PathLike | None, *, cluster_id: str | None = None,
                 num_partitions: int = 1, auto_create_topics: bool = True) -> None:
        self.data_dir = None if data_dir is None else os.fspath(data_dir)
        self.cluster_id = cluster_id or uuid.uuid4().hex[:22]
        self.num_partitions = num_partitions
        self.auto_create_topics = auto_create_topics
        #: the broker's topic defaults by topic config name (from log.retention.ms, ...)
        self.topic_defaults: dict[str, str] = {}
        self.lock = threading.RLock()
        self.topics: dict[str, Topic] = {}
        #: topics being created: written to the metadata before their partitions, so that
        #: a crash in the middle leaves a name the next start removes, never half a topic
        self._creating: set[str] = set()
        #: topics gaining partitions: name -> the partition count before, written to the
        #: metadata before the new partitions are made, so that a crash in the middle leaves
        #: the old count, whose extra partitions the next start removes
        self._growing: dict[str, int] = {}
        self.nodes: list[int] = []          # node ids, in order
        self.alive: set[int] = set()
        self.controller_id = 0
        self.logs = LogManager(None if self.data_dir is None else os.path.join(self.data_dir, "logs"))
        self._lock_fd: int | None = None

    # ---------------------------------------------------------------- persistence
    def _meta_path(self) -> str | None:
        return None if self.data_dir is None else os.path.join(self.data_dir, "topics.json")

    def lock_data_dir(self) -> None:
        """Hold ``.lock`` in the data dir while open, as Kafka locks its log dirs: a second
        broker on the same directory would interleave writes into the same segments. The
        kernel lets go of it when the process ends, even by SIGKILL."""
        import fcntl

        if self.data_dir is None or self._lock_fd is not None:
            return
        os.makedirs(self.data_dir, exist_ok=True)
        fd = os.open(os.path.join(self.data_dir, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise KafkaStorageError(
                f"data dir {self.data_dir} is in use by another kcodec broker (in this or "
                f"another process; it holds {os.path.join(self.data_dir, '.lock')}): stop "
                f"that one first, or give this one another --data-dir") from None
        self._lock_fd = fd

    def open(self) -> None:
        """Load topics and logs from the data dir (recovering the logs)."""
        self.lock_data_dir()
        try:
            self._open()
        except BaseException:
            self._unlock()
            raise

    def _unlock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)       # closing the descriptor releases the lock

    def _open(self) -> None:
        self.logs.open()
        meta: dict[str, Any] = {}
        path = self._meta_path()
        if path and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                meta = json.load(f)
            self.cluster_id = meta.get("cluster_id", self.cluster_id)
        saved = meta.get("topics", {})
        for name in meta.get("creating", []):
            if name not in saved:       # a create cut short by a crash: none of it stays
                self.logs.delete_topic(name)
        for name, before in meta.get("growing", {}).items():
            # partitions added by a CreatePartitions cut short by a crash: none of them stays
            self.logs.delete_partitions(name, [p for t, p in self.logs.partitions()
                                               if t == name and p >= before])
        found: dict[str, list[int]] = {}
        for t, p in self.logs.partitions():
            found.setdefault(t, []).append(p)
        for name in sorted(set(saved) | set(found)):
            info = saved.get(name, {})
            topic = Topic(name, uuid.UUID(info["id"]) if "id" in info else uuid.uuid4(),
                          dict(info.get("configs", {})))
            cfg = topic.log_config(self.topic_defaults)
            count = max(info.get("partitions", 0), max(found.get(name, [-1])) + 1)
            saved_replicas = info.get("replicas", {})
            for i in range(count):
                log = self.logs.get(name, i) or self.logs.create(name, i, cfg)
                log.update_config(cfg)
                # the saved replica set, without nodes this cluster no longer has
                replicas = [r for r in saved_replicas.get(str(i), []) if r in self.nodes]
                replicas = replicas or self.assign_replicas(name, i, 1)
                topic.partitions[i] = Partition(name, i, replicas[0], log, replicas=replicas)
            self.topics[name] = topic
        self.save()

    def save(self) -> None:
        path = self._meta_path()
        if path is None:
            return
        with self.lock:
            meta = {"cluster_id": self.cluster_id, "topics": {
                t.name: {"id": str(t.topic_id), "partitions": len(t.partitions),
                         "configs": t.configs,
                         "replicas": {str(i): p.replicas for i, p in t.partitions.items()}}
                for t in self.topics.values()}}
            if self._creating:
                meta["creating"] = sorted(self._creating)
            if self._growing:
                meta["growing"] = dict(self._growing)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    # ---------------------------------------------------------------- topics
    def assign_replicas(self, topic: str, index: int, factor: int,
                        leader: int | None = None) -> list[int]:
        """Partition ``index``'s replica set of ``factor`` nodes (capped at the node count),
        round-robin as Kafka assigns without racks: the leader of partition i the node after
        partition i-1's (from a start fixed by the topic's name), its followers the nodes
        after it (Kafka also shifts the followers by a random step; kcodec keeps them next,
        so that a topic's layout is the same on every run); ``leader`` fixes the first."""
        nodes = self.nodes or [0]
        if leader is None:
            start = sum(topic.encode()) % len(nodes)
            first = (start + index) % len(nodes)
        else:
            first = nodes.index(leader)
        factor = max(1, min(factor, len(nodes)))
        return [nodes[(first + k) % len(nodes)] for k in range(factor)]

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None,
                     leaders: dict[int, int] | None = None, replication_factor: int = 1,
                     assignments: dict[int, list[int]] | None = None) -> Topic:
        """Create a topic (the caller has checked the name and that it is new, and the
        replication factor and ``assignments``, partition -> replica set, against the
        nodes); ``leaders`` fixes some partitions' first replica."""
        configs = dict(configs or {})
        cfg = LogConfig.from_topic_configs({**self.topic_defaults, **configs})   # InvalidConfig
        with self.lock:
            self.logs.check_descriptors(partitions)     # DescriptorBudgetError, nothing made
            topic = Topic(name, uuid.uuid4(), configs)
            self._creating.add(name)
            self.save()
            try:
                for i in range(partitions):
                    replicas = list((assignments or {}).get(i) or self.assign_replicas(
                        name, i, replication_factor, (leaders or {}).get(i)))
                    topic.partitions[i] = Partition(name, i, replicas[0],
                                                    self.logs.create(name, i, cfg),
                                                    replicas=replicas)
            except BaseException:
                # all partitions or none: what was made goes (files and descriptors too)
                self.logs.delete_topic(name)
                self._creating.discard(name)
                self.save()
                raise
            self.topics[name] = topic
            self._creating.discard(name)
        self.save()
        return topic

    def add_partitions(self, name: str, count: int) -> None:
        """Grow ``name`` to ``count`` partitions, all of them or none: the old count is
        marked as growing in the metadata first, the new partitions are made, and only then
        does the saved count grow; a failure half-way removes what was made (and a crash
        leaves the mark, so that the next start removes it)."""
        with self.lock:
            topic = self.topics[name]
            before = len(topic.partitions)
            self.logs.check_descriptors(count - before)    # DescriptorBudgetError, nothing made
            cfg = topic.log_config(self.topic_defaults)
            factor = len(topic.partitions[0].replicas) if topic.partitions else 1
            made: dict[int, Partition] = {}
            self._growing[name] = before
            self.save()
            try:
                for i in range(before, count):
                    replicas = self.assign_replicas(name, i, factor)
                    made[i] = Partition(name, i, replicas[0], self.logs.create(name, i, cfg),
                                        replicas=replicas)
            except BaseException:
                self.logs.delete_partitions(name, list(range(before, count)))
                del self._growing[name]
                self.save()
                raise
            topic.partitions.update(made)
            del self._growing[name]
        self.save()

    def delete_topic(self, name: str) -> None:
        with self.lock:
            self.topics.pop(name, None)
            self.logs.delete_topic(name)
        self.save()

    def set_configs(self, name: str, configs: dict[str, str]) -> None:
        with self.lock:
            topic = self.topics[name]
            cfg = LogConfig.from_topic_configs({**self.topic_defaults, **configs})
            topic.configs = configs
            self.logs.update_config(name, cfg)
        self.save()

    def set_topic_defaults(self, defaults: dict[str, str]) -> None:
        """New broker topic defaults (by topic config name), applied to every topic's logs."""
        with self.lock:
            LogConfig.from_topic_configs(defaults)      # raises InvalidConfig
            self.topic_defaults = dict(defaults)
            for name, topic in self.topics.items():
                self.logs.update_config(name, topic.log_config(self.topic_defaults))

    def partition(self, topic: str, index: int) -> Partition | None:
        t = self.topics.get(topic)
        return None if t is None else t.partitions.get(index)

    def close(self) -> None:
        try:
            self.logs.flush()
            self.logs.close()
        finally:
            self._unlock()
