"""The file store: segment files on local disk, leases and per-message acks beside them.

Layout of a store directory::

    lock                          flock'd for the short steps that change shared state
    pending/<writer>-<seq>.open   the segment a writer appends to (one writer per file)
    pending/<writer>-<seq>.seg    a sealed segment (its writer rolled over or restarted)
    leases/<life>.lease           one store life's leases: "<chunk> <expires_ms>" lines
    acks/<segment>~<life>.log     one store life's acks of one segment, appended
    failed/<writer>-<seq>.seg     the failed queue, in the same chunk format

(A life is one process's store handle: ``<owner>.<pid>.<random>``. The ack log and lease
table formats, and how they are read, are ``kcodec.runtime.storage.file_state``'s.)

A segment is a sequence of chunks, each what one append wrote::

    chunk  := magic "KQC2" body_length:u32 count:u32 not_before:i64 crc32c(body):u32 body
    body   := the messages in columns (kcodec.runtime.message.encode_many)

(A store written before columns, magic "KQC1", is read too: its body is
``(length:u32 message)*count``, each ``kcodec.runtime.message.encode``'s. A store written
before ack logs and lease tables, with ``acks/<chunk>`` and ``leases/<chunk>`` files, is
read too, and its segments drain and are deleted as any.)

A chunk is named ``<segment stem>@<position>``. A chunk whose bytes are not all there or
whose CRC does not match is being written (or was torn by a crash before its offsets were
committed): readers stop at it. Messages are claimed a chunk at a time (under the lock: no
other life's table holds a live lease on it, then a line in this life's table; an expired
lease is thereby taken over), acknowledged one by one (an entry in the ack log; a whole
chunk acknowledged at once is one entry without indexes), and a sealed segment whose
chunks are all acknowledged is deleted with its acks. So the steady state creates and
deletes no file per chunk: one ack log per segment and life, one lease table per life.
Every process keeps what it read of the ack logs and of the segments' chunk headers, and
reads only what was appended since (claims and ``backlog`` alike).

fsync policy: ``always`` syncs each append and each ack before it returns; ``interval``
syncs appends at most every ``fsync_interval_ms`` (the puller commits to Kafka only after a
sync) and leaves acks to the OS (after a crashed machine, the last acknowledged messages may
be handed out again: duplicates, never a loss); ``never`` leaves it all to the OS (survives a
crashed process, not a crashed machine). Leases are never synced: one lost with the machine
only hands its chunk out again.
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
from kcodec.runtime.storage.file_state import AckLogs, LeaseTables, fsync_dir

__all__ = ["FileStore", "FileSettings"]

MAGIC = b"KQC2"          # body: encode_many's columns
MAGIC_V1 = b"KQC1"       # body: (length:u32 message)*count, read still
_CHUNK = struct.Struct(">4sIIqI")
_LEN = struct.Struct(">I")
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
            fsync_dir(self.folder)

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


class _Scan:
    """A pending segment's complete chunks as read so far; ``first``: the index of the
    first not known to be all acknowledged."""

    __slots__ = ("chunks", "end", "first", "sealed")

    def __init__(self) -> None:
        self.chunks: list[_Chunk] = []
        self.end = 0
        self.first = 0
        self.sealed = False


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
        life = self.token.replace(":", ".").replace("~", "_").replace(os.sep, "_")
        self._acks = AckLogs(os.path.join(path, "acks"), life, fsync == "always")
        self._leases = LeaseTables(os.path.join(path, "leases"), life)
        self._lock_fd, self._lock_pid = -1, 0
        self._scans: dict[str, _Scan] = {}     # pending segment stem -> its chunks known
        self._skip: set[str] = set()           # torn chunks, skipped for good
        self._held: dict[str, Claim] = {}      # chunk -> what this process holds of it
        self._failed_counts: dict[str, int] = {}   # failed segment -> its messages

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
        # one descriptor a process (a flock belongs to the open file, which a fork shares)
        if self._lock_fd < 0 or self._lock_pid != os.getpid():
            self._lock_fd = os.open(os.path.join(self.path, "lock"), os.O_RDWR | os.O_CREAT,
                                    0o644)
            self._lock_pid = os.getpid()
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        return self._lock_fd

    @staticmethod
    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)

    # ------------------------------------------------------------------ leases
    def renew(self) -> None:
        if not self._held:
            return
        lk = self._lock()
        try:
            now = _now_ms()
            taken = self._leases.others(now)
            for chunk in self._held:
                if chunk in taken:      # taken over: the acks we still write count all the same
                    self._leases.mine.pop(chunk, None)
                else:
                    self._leases.mine[chunk] = now + self.lease_ms
            self._leases.write()
        finally:
            self._unlock(lk)

    def _drop_lease(self, chunk: str) -> None:
        """Give the lease on ``chunk`` back now (its messages are claimable at once)."""
        if self._leases.mine.pop(chunk, None) is None:
            return
        lk = self._lock()
        try:
            self._leases.write()
        finally:
            self._unlock(lk)

    # ------------------------------------------------------------------ acks
    def ack(self, claim: Claim, refs: list) -> None:
        # refs are some of claim.refs, none twice: as many is all of them (the usual case,
        # a batch all done), all of the one chunk a claim is, with no set of them to build;
        # then every message of the chunk is acknowledged (claim.refs were those not yet
        # acknowledged when it was loaded) and one entry without indexes says so
        whole = refs is claim.refs or len(refs) == len(claim.refs)
        by: dict[str, list[tuple[int, list[int] | None]]] = {}
        if whole and refs:
            stem, _, pos = claim.lease.rpartition("@")
            by[stem] = [(int(pos), None)]
        else:
            per: dict[str, list[int]] = {}
            for chunk, idx in refs:
                per.setdefault(chunk, []).append(idx)
            for chunk, idxs in per.items():
                stem, _, pos = chunk.rpartition("@")
                by.setdefault(stem, []).append((int(pos), idxs))
        for stem, entries in by.items():
            if self._acks.writes(stem) or self._segment_exists(stem):
                self._acks.write(stem, entries)
            # else its segment was dropped: every chunk of it was acknowledged already
        if whole:
            claim.refs = []
        else:
            left = set(claim.refs) - set(refs)
            claim.refs = [r for r in claim.refs if r in left]
        if not claim.refs:
            self.release(claim)

    def _segment_exists(self, stem: str) -> bool:
        base = os.path.join(self.path, "pending", stem)
        return os.path.exists(base + ".open") or os.path.exists(base + ".seg")

    def release(self, claim: Claim) -> None:
        chunk = claim.lease
        if self._held.pop(chunk, None) is None:
            return
        if claim.refs:
            self._drop_lease(chunk)
        else:
            # all acknowledged: nobody would take it anyway, so the table keeps the stale
            # line until the next claim rewrites it (no write, no lock)
            self._leases.mine.pop(chunk, None)

    # ------------------------------------------------------------------ claiming
    def _segments(self, sub: str = "pending") -> list[str]:
        names = [f for f in os.listdir(os.path.join(self.path, sub))
                 if f.endswith(".seg") or (f.endswith(".open") and sub == "pending")]
        return sorted(names, key=lambda f: (_stem_seq(f)[1], f))

    def _chunks(self, seg: str, start: int, sub: str = "pending") -> Iterator[_Chunk]:
        """The complete chunks of ``seg`` from ``start``, read lazily."""
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

    def _scan(self, seg: str) -> _Scan:
        """The chunks of pending ``seg`` known so far, with the new ones of its tail read."""
        stem = seg.rsplit(".", 1)[0]
        sc = self._scans.get(stem)
        if sc is None:
            sc = self._scans[stem] = _Scan()
        if not sc.sealed:       # a sealed segment's chunks are all known once read
            for ch in self._chunks(seg, sc.end):
                sc.chunks.append(ch)
                sc.end = ch.end
            sc.sealed = seg.endswith(".seg")
        while sc.first < len(sc.chunks) and self._is_done(sc.chunks[sc.first]):
            sc.first += 1       # acks are final: what is done stays done
        return sc

    def _live(self, segs: list[str]) -> None:
        """Forget the segments that are gone (dropped by another process). One missing
        from the listing is looked up by name first: a listing taken while its writer
        renamed it may show neither name, and forgetting its acks would hand it out again."""
        live = {s.rsplit(".", 1)[0] for s in segs}
        for stem in {*self._scans, *self._acks.stems()} - live:
            if not self._segment_exists(stem):
                if stem in self._acks.stems():
                    # ack logs of a segment that is gone: a crash between the segment's
                    # delete and its logs', or an ack that came in just after it
                    self._drop_files(stem)
                self._forget(stem)

    def _forget(self, stem: str) -> None:
        self._scans.pop(stem, None)
        self._acks.forget(stem)
        if self._skip:
            self._skip = {c for c in self._skip if not c.startswith(stem + "@")}

    def _is_done(self, ch: _Chunk) -> bool:
        if ch.name in self._skip:
            return True
        stem, _, _ = ch.name.rpartition("@")
        return self._acks.left(stem, ch.pos, ch.count) == 0

    def claim(self, limit: int) -> Claim | None:
        self._acks.refresh()
        segs = self._segments()
        self._live(segs)
        drop: list[tuple[str, str, int]] = []
        got = None
        try:
            while got is None:
                ch = self._lease_next(segs, drop)
                if ch is None:
                    break
                got = self._load(ch.seg, ch)
        finally:
            for seg, stem, end in drop:
                self._drop_segment(seg, stem, end)
        return got

    def _lease_next(self, segs: list[str], drop: list[tuple[str, str, int]]) -> _Chunk | None:
        """Lease the first chunk that is due and nobody holds; None: none. Notes in
        ``drop`` the sealed segments found all done."""
        now = _now_ms()
        lk = -1
        taken: dict[str, int] = {}
        try:
            for seg in segs:
                sc = self._scan(seg)
                if sc.first == len(sc.chunks):
                    if seg.endswith(".seg") and sc.sealed:
                        stem = seg.rsplit(".", 1)[0]
                        if (seg, stem, sc.end) not in drop:
                            drop.append((seg, stem, sc.end))
                    continue
                for ch in sc.chunks[sc.first:]:
                    if ch.not_before > now or ch.name in self._held or self._is_done(ch):
                        continue
                    if lk < 0:          # the others' leases, read under the lock once
                        lk = self._lock()
                        now = _now_ms()
                        taken = self._leases.others(now)
                    if ch.name in taken:
                        continue
                    self._leases.mine[ch.name] = now + self.lease_ms
                    self._leases.write()
                    return ch
            return None
        finally:
            if lk >= 0:
                self._unlock(lk)

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
            self._skip.add(ch.name)
            self._drop_lease(ch.name)
            return None
        acked = self._acks.acked(ch.name.rpartition("@")[0], ch.pos)
        if not acked:
            msgs = raw if acked is not None else []
            refs = [(ch.name, i) for i in range(len(msgs))]
        else:
            refs, msgs = [], []
            for i, m in enumerate(raw):
                if i not in acked:
                    refs.append((ch.name, i))
                    msgs.append(m)
        if not refs:
            self._drop_lease(ch.name)
            return None
        claim = Claim(ch.name, refs, msgs)
        self._held[ch.name] = claim
        return claim

    def _drop_segment(self, seg: str, stem: str, end: int) -> None:
        """Delete a sealed segment whose every chunk is acknowledged, with its acks (and
        an earlier store's leases of its chunks)."""
        lk = self._lock()
        try:
            path = os.path.join(self.path, "pending", seg)
            try:
                if os.stat(path).st_size != end:
                    return
            except FileNotFoundError:
                return
            # the segment first: a process that looks in between sees no segment, never
            # a segment without its acks (which it would hand out again)
            os.unlink(path)
            self._unlink_files(stem)
        finally:
            self._unlock(lk)
        self._forget(stem)

    def _unlink_files(self, stem: str) -> None:
        """The ack logs of segment ``stem`` (and an earlier store's acks and leases of its
        chunks); under the lock."""
        for sub in ("acks", "leases"):
            folder = os.path.join(self.path, sub)
            for f in os.listdir(folder):
                if f.startswith(stem + "@") or f.startswith(stem + "~"):
                    try:
                        os.unlink(os.path.join(folder, f))
                    except FileNotFoundError:
                        pass

    def _drop_files(self, stem: str) -> None:
        """What is left of a segment that is gone: its acks, once no segment of that name
        is there under the lock either."""
        lk = self._lock()
        try:
            if not self._segment_exists(stem):
                self._unlink_files(stem)
        finally:
            self._unlock(lk)

    # ------------------------------------------------------------------ operator views
    def backlog(self) -> dict[str, int]:
        self._acks.refresh()
        now = _now_ms()
        out = {"pending": 0, "delayed": 0, "processing": 0, "failed": 0}
        segs = self._segments()
        self._live(segs)
        leased = self._leases.live(now)
        for seg in segs:
            sc = self._scan(seg)
            for ch in sc.chunks[sc.first:]:
                if ch.name in self._skip:
                    continue
                left = self._acks.left(ch.name.rpartition("@")[0], ch.pos, ch.count)
                if left <= 0:
                    continue
                if ch.name in leased:
                    out["processing"] += left
                elif ch.not_before > now:
                    out["delayed"] += left
                else:
                    out["pending"] += left
        counts: dict[str, int] = {}
        for seg in self._segments("failed"):    # sealed at once, never changed: counted once
            n = self._failed_counts.get(seg)
            if n is None:
                n = sum(ch.count for ch in self._chunks(seg, 0, "failed"))
            counts[seg] = n
            out["failed"] += n
        self._failed_counts = counts
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
        if self._lock_fd >= 0 or self._leases.mine:
            lk = self._lock()
            try:
                self._leases.close()
            finally:
                self._unlock(lk)
            os.close(self._lock_fd)
            self._lock_fd = -1
        self._acks.close()
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
