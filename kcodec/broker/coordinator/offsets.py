"""Committed offsets on the broker: one store for every kind of group that commits.

The classic coordinator, the consumer-protocol (KIP-848) coordinator, the transaction
coordinator (TxnOffsetCommit, written when its transaction commits) and the offset APIs all
read and write the offsets here; the coordinators decide whether a commit or a delete is
allowed (generations, member epochs, subscriptions), the store keeps what was allowed.

With a data dir the store is the broker's ``__consumer_offsets``: ``consumer_offsets.jsonl``,
one JSON object a line, appended as offsets change and compacted when loaded::

    {"g": group, "t": topic, "p": partition, "o": offset, "e": leader epoch, "m": metadata}
    {"g": group, "t": topic, "p": partition, "del": true}    an offset deleted
    {"g": group, "pt": protocol type}                         the classic group's, kept Empty
    {"g": group, "gm": {...}}                                 the classic group's metadata
    {"g": group, "del": true}                                 the group deleted

A torn last line (a crash mid-write) is skipped. As in Kafka the log also carries the classic
group's protocol type, which an Empty group keeps across a restart, and its metadata (Kafka's
GroupMetadata record: generation, protocol, leader, members and their assignments), written
when a generation's assignment is complete and when the group becomes Empty; the classic
coordinator builds and reads that record, the store keeps the latest of each group. The
store hands the groups it read back to the classic coordinator
(:meth:`OffsetStore.kept_groups`, :meth:`OffsetStore.kept_metadata`).

The store's lock is the classic coordinator's too: a commit checks the generation and writes
the offsets in one step.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from typing import Any, TypeAlias

__all__ = ["OffsetStore", "Committed", "FILE_NAME"]

#: the offsets log in the data dir (the name existing data dirs carry)
FILE_NAME = "consumer_offsets.jsonl"

#: a committed offset: ``(offset, leader epoch, metadata)``
Committed: TypeAlias = "tuple[int, int, str | None]"


class OffsetStore:
    """The committed offsets of every group, by ``(topic, partition)``, kept in ``data_dir``
    when one is given (else in memory only)."""

    def __init__(self, data_dir: str | None = None) -> None:
        self.lock = threading.RLock()
        self._offsets: dict[str, dict[tuple[str, int], Committed]] = {}
        #: the groups the log named when loaded, with their protocol types, in log order
        self._kept: dict[str, str | None] = {}
        #: the latest group-metadata record of each group the log named when loaded
        self._meta: dict[str, dict] = {}
        self._path = None if data_dir is None else os.path.join(data_dir, FILE_NAME)
        self._file: Any = None
        self._load()

    # ------------------------------------------------------------------ on disk
    def _load(self) -> None:
        if self._path is None:
            return
        if os.path.exists(self._path):
            with open(self._path, encoding="utf-8") as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue   # a torn last line after a crash
                    gid = rec["g"]
                    self._kept.setdefault(gid, None)
                    offs = self._offsets.setdefault(gid, {})
                    if "pt" in rec:
                        self._kept[gid] = rec["pt"]
                    elif "gm" in rec:
                        self._meta[gid] = rec["gm"]
                    elif rec.get("del"):
                        if "t" in rec:
                            offs.pop((rec["t"], rec["p"]), None)
                        else:
                            self._kept.pop(gid, None)
                            self._offsets.pop(gid, None)
                            self._meta.pop(gid, None)
                    else:
                        offs[(rec["t"], rec["p"])] = (rec["o"], rec.get("e", -1), rec.get("m"))
        tmp = self._path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            for gid, pt in self._kept.items():
                if pt:
                    f.write(json.dumps({"g": gid, "pt": pt}) + "\n")
                if gid in self._meta:
                    f.write(json.dumps({"g": gid, "gm": self._meta[gid]}) + "\n")
                for (t, p), (o, e, m) in self._offsets.get(gid, {}).items():
                    f.write(json.dumps({"g": gid, "t": t, "p": p, "o": o, "e": e, "m": m}) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        self._file = open(self._path, "a", encoding="utf-8")

    def _append(self, recs: list[dict]) -> None:
        if self._file is not None and recs:
            self._file.write("".join(json.dumps(r) + "\n" for r in recs))
            self._file.flush()

    def kept_groups(self) -> list[tuple[str, str | None]]:
        """``(group id, protocol type or None)`` of each group the log named when the store
        was loaded, in log order: the groups that exist (Empty) after a restart."""
        return list(self._kept.items())

    def kept_metadata(self, group_id: str) -> dict | None:
        """The latest group-metadata record of ``group_id`` the log held when the store was
        loaded (as :meth:`log_group_metadata` was given it), or None."""
        return self._meta.get(group_id)

    def log_group_metadata(self, group_id: str, record: dict) -> None:
        """Keep a classic group's metadata in the log (a JSON object; the latest one of a
        group is what a restart reads back)."""
        with self.lock:
            self._append([{"g": group_id, "gm": record}])

    def log_protocol_type(self, group_id: str, protocol_type: str) -> None:
        """Keep a classic group's protocol type in the log (an Empty group keeps it)."""
        with self.lock:
            self._append([{"g": group_id, "pt": protocol_type}])

    def close(self) -> None:
        """Flush the log to disk and close it; later changes stay in memory only."""
        with self.lock:
            if self._file is not None:
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()
                self._file = None

    # ------------------------------------------------------------------ offsets
    def commit(self, group_id: str, offsets: Iterable[tuple[str, int, int, int, str | None]]) -> None:
        """Store ``(topic, partition, offset, leader epoch, metadata)`` rows for ``group_id``
        (the caller has checked the commit is allowed)."""
        with self.lock:
            mine = self._offsets.setdefault(group_id, {})
            recs = []
            for topic, part, offset, epoch, meta in offsets:
                mine[(topic, part)] = (offset, epoch, meta)
                recs.append({"g": group_id, "t": topic, "p": part, "o": offset, "e": epoch, "m": meta})
            self._append(recs)

    def committed(self, group_id: str) -> dict[tuple[str, int], Committed]:
        """A copy of ``group_id``'s offsets: ``{(topic, partition): (offset, epoch, metadata)}``."""
        with self.lock:
            return dict(self._offsets.get(group_id, {}))

    def has_offsets(self, group_id: str) -> bool:
        """Does ``group_id`` have a committed offset?"""
        with self.lock:
            return bool(self._offsets.get(group_id))

    def delete(self, group_id: str, partitions: Iterable[tuple[str, int]]) -> None:
        """Drop ``group_id``'s offsets of ``partitions`` (those it has none of: nothing to do)."""
        with self.lock:
            mine = self._offsets.get(group_id, {})
            recs = []
            for tp in partitions:
                if mine.pop(tp, None) is not None:
                    recs.append({"g": group_id, "t": tp[0], "p": tp[1], "del": True})
            self._append(recs)

    def delete_topic(self, topic: str) -> None:
        """Drop every group's offsets of ``topic`` (the topic was deleted)."""
        with self.lock:
            recs = []
            for gid, mine in self._offsets.items():
                for tp in [tp for tp in mine if tp[0] == topic]:
                    del mine[tp]
                    recs.append({"g": gid, "t": tp[0], "p": tp[1], "del": True})
            self._append(recs)

    def delete_group(self, group_id: str) -> None:
        """Drop ``group_id``'s offsets and, on disk, the group (its protocol type too)."""
        with self.lock:
            self._offsets.pop(group_id, None)
            self._append([{"g": group_id, "del": True}])
