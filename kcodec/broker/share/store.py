"""Share-group state on disk: ``share_groups.jsonl`` in the data dir (Kafka keeps it in the
``__share_group_state`` topic through its share coordinator).

One JSON object a line, the last line of a key wins::

    {"k": "p", "g": GROUP, "t": TOPIC, "id": TOPIC_ID, "p": PARTITION,
     "s": START_OFFSET, "r": [[FIRST, LAST, STATE, DELIVERY_COUNT], ...]}   a share partition
    {"k": "x", "g": GROUP, "t": TOPIC, "p": PARTITION}                       its state deleted
    {"k": "c", "g": GROUP, "c": {NAME: VALUE, ...}}                          a group's configs

A line is written (and flushed to the operating system) before the request that changed
the state is answered, so a broker killed with SIGKILL loses nothing it acknowledged. On
open the file is read (a torn last line is skipped) and rewritten compacted, and again
while running once it holds more than ``COMPACT_AFTER`` lines and four times the live ones.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

__all__ = ["ShareStateStore"]

FILE = "share_groups.jsonl"
COMPACT_AFTER = 10000


class ShareStateStore:
    """In memory without a data dir; the file otherwise."""

    def __init__(self, data_dir: str | None) -> None:
        self.path = None if data_dir is None else os.path.join(data_dir, FILE)
        self.partitions: dict[tuple[str, str, int], dict[str, Any]] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self._file: Any = None
        self._lines = 0                  # lines in the file since it was last compacted
        self._lock = threading.Lock()
        if self.path is not None:
            self._load()

    def _load(self) -> None:
        assert self.path is not None
        if os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                        kind = rec["k"]
                        if kind == "p":
                            self.partitions[(rec["g"], rec["t"], rec["p"])] = rec
                        elif kind == "x":
                            self.partitions.pop((rec["g"], rec["t"], rec["p"]), None)
                        elif kind == "c":
                            self.configs[rec["g"]] = dict(rec["c"])
                    except (ValueError, KeyError, TypeError):
                        continue          # a torn last line after a crash
        self._compact()

    def _compact(self) -> None:
        """Rewrite the file with one line per live key (atomically: a crash leaves the old
        file or the new one)."""
        assert self.path is not None
        if self._file is not None:
            self._file.close()
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            for rec in self.partitions.values():
                f.write(json.dumps(rec) + "\n")
            for g, c in self.configs.items():
                f.write(json.dumps({"k": "c", "g": g, "c": c}) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._file = open(self.path, "a", encoding="utf-8")
        self._lines = len(self.partitions) + len(self.configs)

    @property
    def durable(self) -> bool:
        """Is there a file (a data dir)? Without one, share partitions are not written."""
        return self.path is not None

    def _write(self, rec: dict[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps(rec, separators=(",", ":")) + "\n")
            self._file.flush()
            self._lines += 1
            if self._lines > COMPACT_AFTER and \
                    self._lines > 4 * (len(self.partitions) + len(self.configs)):
                self._compact()

    def put_partition(self, group: str, topic: str, topic_id: str, index: int,
                      snap: dict[str, Any]) -> None:
        rec = {"k": "p", "g": group, "t": topic, "id": topic_id, "p": index, **snap}
        with self._lock:
            self.partitions[(group, topic, index)] = rec
            self._write(rec)

    def delete_partition(self, group: str, topic: str, index: int) -> None:
        with self._lock:
            if self.partitions.pop((group, topic, index), None) is not None:
                self._write({"k": "x", "g": group, "t": topic, "p": index})

    def put_configs(self, group: str, configs: dict[str, str]) -> None:
        with self._lock:
            self.configs[group] = dict(configs)
            self._write({"k": "c", "g": group, "c": configs})

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()
                self._file = None
