"""The file store: segment files on local disk, leases and per-message acks beside them.

Layout of a store directory::

    lock                          flock'd for the short steps that change shared state
    pending/<writer>-<seq>.open   the segment a writer appends to (one writer per file)
    pending/<writer>-<seq>.seg    a sealed segment (its writer rolled over or restarted)
    leases/<chunk>                a sinker's lease on one chunk: "<owner> <expires_ms>"
    acks/<chunk>                  acknowledged indexes of that chunk, u32 each, appended
    failed/<writer>-<seq>.seg     the failed queue, in the same chunk format

A segment is a sequence of chunks, each what one append wrote::

    chunk  := magic "KQC2" body_length:u32 count:u32 not_before:i64 crc32c(body):u32 body
    body   := the messages in columns (kcodec.runtime.message.encode_many)

(A store written before columns, magic "KQC1", is read too: its body is
``(length:u32 message)*count``, each ``kcodec.runtime.message.encode``'s.)

A chunk is named ``<segment stem>@<position>``. A chunk whose bytes are not all there or
whose CRC does not match is being written (or was torn by a crash before its offsets were
committed): readers stop at it. Messages are claimed a chunk at a time (O_EXCL on the lease
file; an expired lease is taken over under the lock), acknowledged one by one, and a
sealed segment whose chunks are all acknowledged is deleted with its leases and acks.

fsync policy: ``always`` syncs each append and each ack before it returns; ``interval``
syncs appends at most every ``fsync_interval_ms`` (the puller commits to Kafka only after a
sync) and leaves acks to the OS (after a crashed machine, the last acknowledged messages may
be handed out again: duplicates, never a loss); ``never`` leaves it all to the OS (survives a
crashed process, not a crashed machine).
"""

from __future__ import annotations

import fcntl
import os
import struct
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kcodec.crc import crc32c
from kcodec.runtime.message import Message, decode, decode_many, encode_many
from kcodec.runtime.storage import Claim

__all__ = ["FileStore", "FileSettings"]

MAGIC = b"KQC2"          # body: encode_many's columns
MAGIC_V1 = b"KQC1"       # body: (length:u32 message)*count, read still
_CHUNK = struct.Struct(">4sIIqI")
_LEN = struct.Struct(">I")
_IDX = struct.Struct(">I")
SEGMENT_BYTES = 64 << 20
POLICIES = ("always", "interval", "never")


@dataclass
class FileSettings:
    """The file store's settings (``--fsync``, ``--fsync-interval-ms``)."""

    fsync: str = field(default="always", metadata={
        "help": "always | interval | never: the file store's fsync policy",
        "choices": POLICIES})
    fsync_interval_ms: int = field(default=1000, metadata={
        "help": "with --fsync interval: sync at least this often"})


def _now_ms() -> int:
    return int(time.time() * 1000)


def _stem_seq(name: str) -> tuple[str, int]:
    stem = name.rsplit(".", 1)[0]
    writer, _, seq = stem.rpartition("-")
    return writer, int(seq) if seq.isdigit() else -1


class _Writer:
    """Appends chunks to this writer's own segments in one folder."""

    def __init__(self, folder: str, name: str, policy: str, segment_bytes: int) -> None:
        self.folder, self.name, self.policy = folder, name, policy
        self.segment_bytes = segment_bytes
        self.fd = -1
        self.size = 0
        self.path = ""
        self.dirty = False

    def _open(self) -> None:
        seq = time.time_ns()    # never a name used before: readers remember names
        for f in os.listdir(self.folder):   # seal what an earlier life of this writer left open
            w, s = _stem_seq(f)
            if w != self.name:
                continue
            seq = max(seq, s + 1)
            if f.endswith(".open"):
                p = os.path.join(self.folder, f)
                os.replace(p, p[:-5] + ".seg")
        self.path = os.path.join(self.folder, f"{self.name}-{seq:020d}.open")
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = 0
        if self.policy != "never":
            _fsync_dir(self.folder)

    def append(self, messages: list[Message], not_before: int = 0, sync: bool = True) -> None:
        """One chunk of ``messages``; synced by the policy (``always``) unless not ``sync``
        (the caller syncs after several: ``FileStore.append_batches``)."""
        if not messages:
            return
        if self.fd < 0:
            self._open()
        body = encode_many(messages)
        data = _CHUNK.pack(MAGIC, len(body), len(messages), not_before, crc32c(body)) + body
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]
        self.size += len(data)
        self.dirty = True
        if self.policy == "always" and sync:
            self.sync()
        if self.size >= self.segment_bytes:
            self.seal()

    def sync(self) -> None:
        if self.fd >= 0 and self.dirty:
            os.fsync(self.fd)
        self.dirty = False

    def seal(self) -> None:
        """Close the segment for good (readers may delete it once all of it is acked)."""
        if self.fd < 0:
            return
        if self.policy != "never":
            self.sync()
        os.close(self.fd)
        self.fd = -1
        os.replace(self.path, self.path[:-5] + ".seg")


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _Chunk:
    __slots__ = ("name", "seg", "pos", "count", "not_before", "end")

    def __init__(self, name: str, seg: str, pos: int, count: int, not_before: int, end: int) -> None:
        self.name, self.seg, self.pos, self.count = name, seg, pos, count
        self.not_before, self.end = not_before, end


def _read_chunk_header(f: Any, pos: int, size: int) -> tuple[int, int, int] | None:
    """(count, not_before, end) of the chunk at ``pos``, or None when it is not complete."""
    if pos + _CHUNK.size > size:
        return None
    f.seek(pos)
    head = f.read(_CHUNK.size)
    if len(head) < _CHUNK.size:
        return None
    magic, blen, count, not_before, _crc = _CHUNK.unpack(head)
    end = pos + _CHUNK.size + blen
    if (magic != MAGIC and magic != MAGIC_V1) or end > size:
        return None
    return count, not_before, end


def _read_chunk(f: Any, pos: int) -> list[Message] | None:
    """The messages of the chunk at ``pos``; None when it is torn or not complete. A
    complete chunk (its CRC matches) whose body does not decode raises the decode error."""
    f.seek(pos)
    head = f.read(_CHUNK.size)
    if len(head) < _CHUNK.size:
        return None
    magic, blen, count, _nb, crc = _CHUNK.unpack(head)
    if magic != MAGIC and magic != MAGIC_V1:
        return None
    body = f.read(blen)
    if len(body) < blen or crc32c(body) != crc:
        return None
    if magic == MAGIC:
        msgs = decode_many(body)
        return msgs if len(msgs) == count else None
    out, p = [], 0
    for _ in range(count):
        if p + 4 > blen:
            return None
        (n,) = _LEN.unpack_from(body, p)
        p += 4
        if p + n > blen:
            return None
        out.append(decode(body[p:p + n]))
        p += n
    return out


class FileStore:
    """A store in one local directory, shared by the processes of one runtime."""

    kind = "file"

    def __init__(self, path: str, owner: str, fsync: str = "always", fsync_interval_ms: int = 1000,
                 lease_ms: int = 30000, segment_bytes: int = SEGMENT_BYTES) -> None:
        if fsync not in POLICIES:
            raise ValueError(f"fsync must be one of {', '.join(POLICIES)}, got {fsync!r}")
        self.path = path
        self.owner = owner
        self.token = f"{owner}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.policy = fsync
        self.interval = fsync_interval_ms / 1000
        self.lease_ms = lease_ms
        for sub in ("pending", "leases", "acks", "failed"):
            os.makedirs(os.path.join(path, sub), exist_ok=True)
        self._pending = _Writer(os.path.join(path, "pending"), owner, fsync, segment_bytes)
        self._failed = _Writer(os.path.join(path, "failed"), owner, fsync, segment_bytes)
        self._last_sync = time.monotonic()
        self._cursor: dict[str, int] = {}      # segment -> position of its first chunk not known done
        self._done: set[str] = set()
        self._held: dict[str, Claim] = {}      # chunk -> what this process holds of it

    @classmethod
    def from_settings(cls, s: Any, owner: str, quick: bool = False, *,
                      config: FileSettings | None = None) -> FileStore:
        """The store under ``s.state_dir`` (``quick`` changes nothing: no server to wait for)."""
        c = config or FileSettings()
        return cls(os.path.join(s.state_dir, "store"), owner, c.fsync, c.fsync_interval_ms,
                   s.lease_ms)

    # ------------------------------------------------------------------ writing
    def append(self, messages: list[Message]) -> None:
        self._pending.append(messages)

    def append_batches(self, batches: list[list[Message]]) -> None:
        """A chunk a batch, one fsync for them all (``always``): fewer, larger syncs."""
        for b in batches:
            self._pending.append(b, sync=False)
        if self.policy == "always":
            self._pending.sync()

    def needs_sync(self) -> bool:
        return self.policy == "interval" and self._pending.dirty

    def prepare(self, settings: Any) -> None:
        """Nothing to check: the files are as durable as --fsync says."""

    def sync_due(self) -> bool:
        return self.needs_sync() and time.monotonic() - self._last_sync >= self.interval

    def sync(self) -> None:
        self._pending.sync()
        self._failed.sync()
        self._last_sync = time.monotonic()

    def retry(self, messages: list[Message]) -> None:
        by_time: dict[int, list[Message]] = {}
        for m in messages:
            by_time.setdefault(m.not_before, []).append(m)
        for nb, ms in sorted(by_time.items()):
            self._pending.append(ms, nb)
        if self.policy == "interval":
            self.sync()   # the ack that follows must not outlive the copy

    def fail(self, messages: list[Message]) -> None:
        # a segment of its own, sealed at once: requeue and clear (another process) may
        # then take every failed segment without racing a writer
        self._failed.append(messages)
        self._failed.seal()

    # ------------------------------------------------------------------ locking
    def _lock(self) -> int:
        fd = os.open(os.path.join(self.path, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    @staticmethod
    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    # ------------------------------------------------------------------ leases
    def _lease_path(self, chunk: str) -> str:
        return os.path.join(self.path, "leases", chunk)

    def _ack_path(self, chunk: str) -> str:
        return os.path.join(self.path, "acks", chunk)

    def _lease_text(self) -> bytes:
        return f"{self.token} {_now_ms() + self.lease_ms}\n".encode()

    @staticmethod
    def _read_lease(path: str) -> tuple[str, int] | None:
        try:
            with open(path, "rb") as f:
                owner, _, exp = f.read().decode("ascii", "replace").strip().partition(" ")
        except FileNotFoundError:
            return None
        try:
            return owner, int(exp)
        except ValueError:
            return owner, 0     # half written by a crashed sinker: expired

    def _write_lease(self, path: str) -> None:
        tmp = f"{path}.{self.token.replace(':', '_')}.tmp"
        with open(tmp, "wb") as f:
            f.write(self._lease_text())
        os.replace(tmp, path)

    def _try_lease(self, chunk: str) -> bool:
        path = self._lease_path(chunk)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            held = self._read_lease(path)
            if held is not None and held[1] > _now_ms():
                return False
            lk = self._lock()   # expired: take it over, one sinker at a time
            try:
                held = self._read_lease(path)
                if held is not None and held[1] > _now_ms():
                    return False
                self._write_lease(path)
                return True
            finally:
                self._unlock(lk)
        try:
            os.write(fd, self._lease_text())
        finally:
            os.close(fd)
        return True

    def renew(self) -> None:
        if not self._held:
            return
        lk = self._lock()
        try:
            for chunk in list(self._held):
                path = self._lease_path(chunk)
                held = self._read_lease(path)
                if held is None or held[0] != self.token:
                    continue    # taken over: the acks we still write count all the same
                self._write_lease(path)
        finally:
            self._unlock(lk)

    # ------------------------------------------------------------------ acks
    def _acked(self, chunk: str) -> set[int]:
        try:
            with open(self._ack_path(chunk), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return set()
        n = len(data) // 4
        return {i for (i,) in _IDX.iter_unpack(data[:n * 4])}

    def ack(self, claim: Claim, refs: list) -> None:
        # refs are some of claim.refs, none twice: as many is all of them (the usual case,
        # a batch all done), all of the one chunk a claim is, with no set of them to build
        whole = refs is claim.refs or len(refs) == len(claim.refs)
        by: dict[str, list[int]] = {}
        if whole and refs:
            by[claim.lease] = [i for _, i in refs]
        else:
            for chunk, idx in refs:
                by.setdefault(chunk, []).append(idx)
        for chunk, idxs in by.items():
            fd = os.open(self._ack_path(chunk), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, struct.pack(f">{len(idxs)}I", *idxs))
                if self.policy == "always":     # (interval: a lost ack re-delivers, no more)
                    os.fsync(fd)
            finally:
                os.close(fd)
        if whole:
            claim.refs = []
        else:
            left = set(claim.refs) - set(refs)
            claim.refs = [r for r in claim.refs if r in left]
        if not claim.refs:
            self.release(claim)

    def release(self, claim: Claim) -> None:
        chunk = claim.lease
        if self._held.pop(chunk, None) is None:
            return
        path = self._lease_path(chunk)
        held = self._read_lease(path)
        if held is not None and held[0] == self.token:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    # ------------------------------------------------------------------ claiming
    def _segments(self, sub: str = "pending") -> list[str]:
        names = [f for f in os.listdir(os.path.join(self.path, sub))
                 if f.endswith(".seg") or (f.endswith(".open") and sub == "pending")]
        return sorted(names, key=lambda f: (_stem_seq(f)[1], f))

    def _chunks(self, seg: str, start: int, sub: str = "pending") -> Iterator[_Chunk]:
        """The complete chunks of ``seg`` from ``start``, read lazily (a claim stops at the
        first it can take)."""
        path = os.path.join(self.path, sub, seg)
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            return
        with f:
            size = os.fstat(f.fileno()).st_size
            pos = start
            stem = seg.rsplit(".", 1)[0]
            while True:
                h = _read_chunk_header(f, pos, size)
                if h is None:
                    return
                count, nb, end = h
                yield _Chunk(f"{stem}@{pos}", seg, pos, count, nb, end)
                pos = end

    def _is_done(self, ch: _Chunk) -> bool:
        if ch.name in self._done:
            return True
        try:
            size = os.stat(self._ack_path(ch.name)).st_size
        except FileNotFoundError:
            size = 0
        if size // 4 >= ch.count and len(self._acked(ch.name)) >= ch.count:
            self._done.add(ch.name)
            return True
        return False

    def claim(self, limit: int) -> Claim | None:
        now = _now_ms()
        segs = self._segments()
        live = {s.rsplit(".", 1)[0] for s in segs}
        for k in [k for k in self._cursor if k not in live]:
            del self._cursor[k]
        for seg in segs:
            stem = seg.rsplit(".", 1)[0]
            start = self._cursor.get(stem, 0)
            all_done = True
            end = start
            for ch in self._chunks(seg, start):
                end = ch.end
                if self._is_done(ch):
                    if all_done:
                        self._cursor[stem] = ch.end
                    continue
                all_done = False
                if ch.not_before > now or ch.name in self._held:
                    continue
                if not self._try_lease(ch.name):
                    continue
                got = self._load(seg, ch)
                if got is None:
                    continue
                return got
            if all_done and seg.endswith(".seg"):
                self._drop_segment(seg, stem, end)
        return None

    def _load(self, seg: str, ch: _Chunk) -> Claim | None:
        try:
            with open(os.path.join(self.path, "pending", seg), "rb") as f:
                raw = _read_chunk(f, ch.pos)
        except FileNotFoundError:
            try:
                with open(os.path.join(self.path, "pending", seg.rsplit(".", 1)[0] + ".seg"),
                          "rb") as f:
                    raw = _read_chunk(f, ch.pos)
            except FileNotFoundError:
                raw = None
        if raw is None:     # torn (a crash before its offsets were committed): skip for good
            self._done.add(ch.name)
            self._drop_lease(ch.name)
            return None
        acked = self._acked(ch.name)
        if not acked:
            msgs = raw
            refs = [(ch.name, i) for i in range(len(raw))]
        else:
            refs, msgs = [], []
            for i, m in enumerate(raw):
                if i not in acked:
                    refs.append((ch.name, i))
                    msgs.append(m)
        claim = Claim(ch.name, refs, msgs)
        if not refs:
            self._done.add(ch.name)
            self._drop_lease(ch.name)
            return None
        self._held[ch.name] = claim
        return claim

    def _drop_lease(self, chunk: str) -> None:
        held = self._read_lease(self._lease_path(chunk))
        if held is not None and held[0] == self.token:
            try:
                os.unlink(self._lease_path(chunk))
            except FileNotFoundError:
                pass

    def _drop_segment(self, seg: str, stem: str, end: int) -> None:
        """Delete a sealed segment whose every chunk is acknowledged, with its acks."""
        lk = self._lock()
        try:
            path = os.path.join(self.path, "pending", seg)
            try:
                if os.stat(path).st_size != end:
                    return
            except FileNotFoundError:
                return
            for sub in ("acks", "leases"):
                folder = os.path.join(self.path, sub)
                for f in os.listdir(folder):
                    if f.startswith(stem + "@"):
                        try:
                            os.unlink(os.path.join(folder, f))
                        except FileNotFoundError:
                            pass
            os.unlink(path)
        finally:
            self._unlock(lk)
        self._cursor.pop(stem, None)
        self._done = {c for c in self._done if not c.startswith(stem + "@")}

    # ------------------------------------------------------------------ operator views
    def backlog(self) -> dict[str, int]:
        now = _now_ms()
        out = {"pending": 0, "delayed": 0, "processing": 0, "failed": 0}
        for seg in self._segments():
            for ch in self._chunks(seg, 0):
                if ch.name in self._done:
                    continue
                left = ch.count - len(self._acked(ch.name))
                if left <= 0:
                    continue
                lease = self._read_lease(self._lease_path(ch.name))
                if lease is not None and lease[1] > now:
                    out["processing"] += left
                elif ch.not_before > now:
                    out["delayed"] += left
                else:
                    out["pending"] += left
        for seg in self._segments("failed"):
            out["failed"] += sum(ch.count for ch in self._chunks(seg, 0, "failed"))
        return out

    def _failed_all(self) -> list[tuple[str, list[Message]]]:
        out = []
        for seg in self._segments("failed"):
            msgs: list[Message] = []
            with open(os.path.join(self.path, "failed", seg), "rb") as f:
                for ch in self._chunks(seg, 0, "failed"):
                    raw = _read_chunk(f, ch.pos)
                    if raw is not None:
                        msgs += raw
            out.append((seg, msgs))
        return out

    def failed_messages(self, limit: int) -> list[Message]:
        out: list[Message] = []
        for _seg, msgs in self._failed_all():
            out += msgs
            if len(out) >= limit:
                break
        return out[:limit]

    def requeue(self) -> int:
        lk = self._lock()
        try:
            n = 0
            for seg, msgs in self._failed_all():
                if msgs:
                    self._pending.append([m._replace(attempts=0, not_before=0) for m in msgs])
                    self._pending.sync()
                    n += len(msgs)
                os.unlink(os.path.join(self.path, "failed", seg))
            return n
        finally:
            self._unlock(lk)

    def clear(self) -> int:
        lk = self._lock()
        try:
            n = 0
            for seg, msgs in self._failed_all():
                n += len(msgs)
                os.unlink(os.path.join(self.path, "failed", seg))
            return n
        finally:
            self._unlock(lk)

    def close(self) -> None:
        for claim in list(self._held.values()):
            self.release(claim)
        self._pending.seal()
        self._failed.seal()


def seal_stale(path: str) -> None:
    """Seal every segment left open (run while no writer lives: the master, at start)."""
    folder = os.path.join(path, "pending")
    if not os.path.isdir(folder):
        return
    for f in os.listdir(folder):
        if f.endswith(".open"):
            p = os.path.join(folder, f)
            os.replace(p, p[:-5] + ".seg")
