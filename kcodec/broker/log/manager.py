"""The broker's logs: one ``PartitionLog`` per topic partition, on disk or in memory.

Data directory layout (Kafka's, plus one file of kcodec's own):

    <data_dir>/
        <topic>-<partition>/                 one directory per partition (segments inside)
        log-start-offset-checkpoint          Kafka's checkpoint format (below)
        recovery-point-offset-checkpoint     the offsets flushed at the last flush or close
        .kafka_cleanshutdown                 present after a clean close, removed on open
        kcodec-topic-configs.json            the topic configs the log was given

    checkpoint := "0\\n" count "\\n" { topic " " partition " " offset "\\n" }*

Opening loads every segment. As Kafka does, a segment that ends at or below its partition's
recovery point (the offset flushed when the checkpoint was last written: at every flush and
at a clean close) is trusted: its batch headers are walked to rebuild the indexes, its CRCs
are not checked. Every segment past the recovery point, and every segment of a partition
without one (no checkpoint: an unclean shutdown before any flush), is recovered: whole
batches, good CRCs, increasing offsets; a torn or corrupt tail is truncated and the indexes
rebuilt. A truncation below the recovery point lowers it and rewrites the checkpoint at once.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable

from kcodec.broker.log.config import LogConfig
from kcodec.broker.log.errors import DescriptorBudgetError, InvalidConfig, KafkaStorageError
from kcodec.broker.log.files import SEGMENT_FILES
from kcodec.broker.log.partition import PartitionLog
from kcodec.broker.log.recovery import Truncation, report
from kcodec.broker.log.segment import SegmentHook

__all__ = ["LogManager", "read_checkpoint", "write_checkpoint"]

LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
RECOVERY_CHECKPOINT = "recovery-point-offset-checkpoint"
FILES_PER_PARTITION = 3        # the active segment's .log, .index and .timeindex (at most:
                               # they are opened through the bounded cache of .files)
DESCRIPTOR_RESERVE = 1024      # descriptors a create leaves for connections (at most 1/4)


def descriptor_budget() -> tuple[int, int] | None:
    """(the process's soft descriptor limit, descriptors open now), None if unknown."""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        in_use = len(os.listdir("/proc/self/fd"))
    except (ImportError, OSError, ValueError):
        return None
    if limit == resource.RLIM_INFINITY or limit <= 0:
        return None
    return int(limit), in_use
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
TOPIC_CONFIGS = "kcodec-topic-configs.json"
_LEGAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def write_checkpoint(path: str, entries: Iterable[tuple[str, int, int]]) -> None:
    """Write a Kafka offset checkpoint file atomically (temporary file, fsync, rename)."""
    rows = sorted(entries)
    text = f"0\n{len(rows)}\n" + "".join(f"{t} {p} {o}\n" for t, p, o in rows)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """A Kafka offset checkpoint file as {(topic, partition): offset}; empty if missing
    or unreadable (the logs then start from their first segment)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    out: dict[tuple[str, int], int] = {}
    try:
        if not lines or lines[0].strip() != "0":
            return {}
        count = int(lines[1])
        for line in lines[2:2 + count]:
            topic, part, off = line.split()
            out[(topic, int(part))] = int(off)
    except (ValueError, IndexError):
        return {}
    return out


def _check_topic(topic: str) -> None:
    if not topic or len(topic) > 249 or topic in (".", "..") or not set(topic) <= _LEGAL:
        raise InvalidConfig(f"illegal topic name {topic!r}")


class LogManager:
    """Every partition log of a broker (``data_dir`` None: memory only).

        mgr = LogManager("/tmp/kdata"); mgr.open()
        log = mgr.create("events", 0, LogConfig())
        log.append(batch_bytes, now_ms=now)
        mgr.close()
    """

    def __init__(self, data_dir: str | os.PathLike[str] | None, *,
                 segment_hooks: Iterable[Callable[[str, int], SegmentHook]] = ()) -> None:
        self.data_dir = None if data_dir is None else os.fspath(data_dir)
        #: factories of per-segment hooks, called with (topic, partition) for every log
        #: created or loaded (the aborted-transactions index plugs in here)
        self.segment_hooks = list(segment_hooks)
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._lock = threading.RLock()
        self._file_lock = threading.Lock()    # one writer of the checkpoint files at a time
        self._opened = False
        #: what the last ``open`` found: {(topic, partition): list of segment recovery
        #: results that truncated something}
        self.recovered: dict[tuple[str, int], list] = {}
        #: what recovery cut off at the last ``open``, per partition (logged as it is found)
        self.truncations: list[Truncation] = []
        self.clean_shutdown = False

    # -- life cycle -----------------------------------------------------------------------

    def open(self) -> None:
        """Load and recover every partition under the data directory (memory: nothing)."""
        with self._lock:
            if self._opened:
                return
            self._opened = True
            if self.data_dir is None:
                return
            os.makedirs(self.data_dir, exist_ok=True)
            marker = os.path.join(self.data_dir, CLEAN_SHUTDOWN)
            self.clean_shutdown = os.path.exists(marker)
            starts = read_checkpoint(os.path.join(self.data_dir, LOG_START_CHECKPOINT))
            points = read_checkpoint(os.path.join(self.data_dir, RECOVERY_CHECKPOINT))
            configs = self._read_configs()
            for name in sorted(os.listdir(self.data_dir)):
                path = os.path.join(self.data_dir, name)
                if not os.path.isdir(path):
                    continue
                if name.endswith("-delete"):
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                topic, sep, part = name.rpartition("-")
                if not sep or not part.isdigit() or not topic:
                    continue
                key = (topic, int(part))
                cfg = LogConfig()
                if topic in configs:
                    try:
                        cfg = LogConfig.from_topic_configs(configs[topic])
                    except InvalidConfig:
                        pass
                try:
                    log = PartitionLog(topic, key[1], cfg, path,
                                       log_start_offset=starts.get(key, 0),
                                       on_start_offset=self._start_moved,
                                       hooks=self._hooks_for(topic, key[1]), _load=True,
                                       recovery_point=points.get(key, 0),
                                       on_truncated=self._recovery_lowered)
                except OSError as exc:
                    raise KafkaStorageError(f"cannot load {path}: {exc}") from exc
                self._logs[key] = log
                bad = [s.recovery for s in log.segments
                       if s.recovery is not None and not s.recovery.ok]
                if bad:
                    self.recovered[key] = bad
                if log.truncation is not None:
                    self.truncations.append(log.truncation)
                    report([log.truncation])
            if os.path.exists(marker):
                os.unlink(marker)
            self._checkpoint_starts()
            self._checkpoint_recovery()     # what is loaded is on disk and vouched for

    def close(self) -> None:
        """Flush and close every log; on disk, checkpoint and mark the shutdown clean."""
        with self._lock:
            for log in self._logs.values():
                log.close()
            if self.data_dir is not None and self._opened:
                self._checkpoint_starts()
                self._checkpoint_recovery()
                with open(os.path.join(self.data_dir, CLEAN_SHUTDOWN), "w"):
                    pass
            self._logs.clear()
            self._opened = False

    def __enter__(self) -> LogManager:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def flush(self) -> None:
        """fsync every log and write the checkpoints."""
        with self._lock:
            for log in list(self._logs.values()):
                log.flush()
            if self.data_dir is not None:
                self._checkpoint_starts()
                self._checkpoint_recovery()

    # -- partitions -----------------------------------------------------------------------

    def partitions(self) -> list[tuple[str, int]]:
        with self._lock:
            return sorted(self._logs)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def create(self, topic: str, partition: int, config: LogConfig | None = None
               ) -> PartitionLog:
        """The log of (topic, partition), created if missing (an existing one gets
        ``config`` if given)."""
        with self._lock:
            self.open()
            key = (topic, partition)
            log = self._logs.get(key)
            if log is not None:
                if config is not None and config != log.config:
                    log.update_config(config)
                    self._save_config(topic, config)
                return log
            _check_topic(topic)
            if partition < 0:
                raise InvalidConfig(f"partition {partition} is negative")
            cfg = config or LogConfig()
            path = None
            if self.data_dir is not None:
                path = os.path.join(self.data_dir, f"{topic}-{partition}")
            try:
                log = PartitionLog(topic, partition, cfg, path,
                                   on_start_offset=self._start_moved,
                                   hooks=self._hooks_for(topic, partition),
                                   on_truncated=self._recovery_lowered)
            except OSError as exc:
                raise KafkaStorageError(f"cannot create {path}: {exc}") from exc
            self._logs[key] = log
            self._save_config(topic, cfg)
            return log

    def update_config(self, topic: str, config: LogConfig) -> None:
        """Give every partition of ``topic`` a new config (and remember it on disk)."""
        with self._lock:
            for (t, _), log in self._logs.items():
                if t == topic:
                    log.update_config(config)
            self._save_config(topic, config)

    def check_descriptors(self, partitions: int) -> None:
        """Refuse (DescriptorBudgetError) to make ``partitions`` more partitions on disk if
        their files would pass the process's descriptor limit less DESCRIPTOR_RESERVE (kept
        for connections and everything else); memory logs need none. Segment files are
        opened through the bounded cache (:data:`kcodec.broker.log.files.SEGMENT_FILES`),
        so a create needs at most the cache's free places, whatever its size."""
        if self.data_dir is None or partitions <= 0:
            return
        budget = descriptor_budget()
        if budget is None:
            return
        limit, in_use = budget
        need = min(partitions * FILES_PER_PARTITION,
                   max(0, SEGMENT_FILES.capacity - len(SEGMENT_FILES)))
        reserve = min(DESCRIPTOR_RESERVE, limit // 4)
        left = limit - reserve - in_use
        if need > left:
            raise DescriptorBudgetError(
                f"{partitions} partition(s) need {need} file descriptors, and only {max(left, 0)} "
                f"of the node's limit of {limit} are left ({in_use} open, {reserve} kept for "
                f"connections): raise the limit (ulimit -n) or create fewer partitions")

    def delete_topic(self, topic: str) -> list[int]:
        """Remove every partition of ``topic`` (files included); returns their numbers."""
        with self._lock:
            gone = sorted(p for t, p in self._logs if t == topic)
            for p in gone:
                log = self._logs.pop((topic, p))
                log.delete()
                if log.directory is not None:
                    shutil.rmtree(log.directory, ignore_errors=True)
            if gone and self.data_dir is not None:
                self._checkpoint_starts()
                configs = self._read_configs()
                if configs.pop(topic, None) is not None:
                    self._write_configs(configs)
            return gone

    def delete_partitions(self, topic: str, partitions: list[int]) -> None:
        """Remove those partitions of ``topic`` that exist (files included): a grow of the
        topic that did not finish."""
        with self._lock:
            gone = False
            for p in partitions:
                log = self._logs.pop((topic, p), None)
                if log is None:
                    continue
                gone = True
                log.delete()
                if log.directory is not None:
                    shutil.rmtree(log.directory, ignore_errors=True)
            if gone and self.data_dir is not None:
                self._checkpoint_starts()

    def run_retention(self, now_ms: int | None = None) -> int:
        """Apply retention to every log (and timed flushes); returns segments deleted."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            logs = list(self._logs.values())
        return sum(log.run_retention(now) for log in logs)

    def run_cleaner(self, now_ms: int | None = None) -> int:
        """Compact every log of a compacted topic that has records not yet cleaned (or
        tombstones waiting); returns the records removed."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            logs = list(self._logs.values())
        return sum(log.run_cleaner(now) for log in logs)

    def _hooks_for(self, topic: str, partition: int) -> list[SegmentHook]:
        return [make(topic, partition) for make in self.segment_hooks]

    # -- checkpoints and configs ----------------------------------------------------------

    def _start_moved(self, log: PartitionLog) -> None:
        if self.data_dir is not None and self._opened:
            self._checkpoint_starts()

    def _checkpoint_starts(self) -> None:
        assert self.data_dir is not None
        try:
            with self._file_lock:
                write_checkpoint(os.path.join(self.data_dir, LOG_START_CHECKPOINT),
                                 [(t, p, log.log_start_offset)
                                  for (t, p), log in list(self._logs.items())])
        except OSError as exc:
            raise KafkaStorageError(f"cannot write the log start checkpoint: {exc}") from exc

    def _recovery_lowered(self, log: PartitionLog) -> None:
        if self.data_dir is not None and (log.topic, log.partition) in self._logs:
            try:
                self._checkpoint_recovery()
            except OSError as exc:
                raise KafkaStorageError(f"cannot write the recovery point checkpoint: {exc}") from exc

    def _checkpoint_recovery(self) -> None:
        assert self.data_dir is not None
        with self._file_lock:
            write_checkpoint(os.path.join(self.data_dir, RECOVERY_CHECKPOINT),
                             [(t, p, log.recovery_point)
                              for (t, p), log in list(self._logs.items())])

    def _read_configs(self) -> dict[str, dict[str, str]]:
        if self.data_dir is None:
            return {}
        try:
            with open(os.path.join(self.data_dir, TOPIC_CONFIGS), encoding="utf-8") as f:
                data = json.load(f)
            return {str(k): dict(v) for k, v in data.items()}
        except (OSError, ValueError, AttributeError, TypeError):
            return {}

    def _write_configs(self, configs: dict[str, dict[str, str]]) -> None:
        assert self.data_dir is not None
        path = os.path.join(self.data_dir, TOPIC_CONFIGS)
        tmp = path + ".tmp"
        with self._file_lock:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(configs, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)

    def _save_config(self, topic: str, config: LogConfig) -> None:
        if self.data_dir is None:
            return
        configs = self._read_configs()
        new = config.to_topic_configs()
        if configs.get(topic) != new:
            configs[topic] = new
            self._write_configs(configs)
