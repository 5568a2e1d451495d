"""The file store's shared state beside its segments: the ack logs and the lease tables.

Both are kept so that the steady state (append, claim, ack, release of chunk after chunk)
creates and deletes no file per chunk: a file-system create or unlink commits to the
journal and waits behind every other process's fsync (ext4: ~0.4 ms each under load).

Ack logs, one per (segment, store life): ``acks/<segment stem>~<life>.log``, appended only
by the life that created it, read incrementally by every process (how far each log was
read is remembered; an entry not all there, or whose CRC does not match, ends what is read
of that log for now and is read again next time)::

    log    := entry* zeros*
    entry  := position:u64 n:u32 index:u32 * n crc32c(position n indexes):u32
              (n = 0xFFFFFFFF, no indexes: every message of the chunk at that position)

When acks are synced (``--fsync always``) a log is preallocated: zeros written and synced
once, 256 KiB at a time, which the entries then overwrite; an fdatasync of an overwrite that
leaves the size alone commits no file-system journal, so it does not queue behind the
pullers' fsyncs of their growing segments. A zero entry fails its CRC: the end, as a torn
tail. A crash mid-entry leaves a torn entry there, and nothing after it: that life is over.

An earlier store wrote ``acks/<segment stem>@<position>`` (``index:u32 *``, one file a
chunk); such a file is read once when seen: no writer of that format runs beside this one.

Lease tables, one per store life: ``leases/<life>.lease``, lines ``<chunk> <expires_ms>``,
rewritten in place, always under the store's lock (which every taker holds while it reads
the others' tables and writes its own), not synced (a lease lost with the machine only
hands its chunk out again). A table none of whose leases is live is removed by the next
taker; its owner, if it still runs, writes it anew (it sees its file gone). An earlier
store's ``leases/<chunk>`` (``<owner> <expires_ms>``) is honoured until it expires.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable

from kcodec.crc import crc32c

__all__ = ["AckLogs", "LeaseTables", "WHOLE", "encode_entry", "fsync_dir"]

WHOLE = 0xFFFFFFFF
_HEAD = struct.Struct(">QI")
_U32 = struct.Struct(">I")
_LOG = ".log"
_PREALLOC = 256 << 10   # zeros ahead of a synced log's acks: ~16,000 whole-chunk entries
_WINDOW = 16 << 10      # read of a log at a time (a preallocated one is mostly zeros)
_TABLE = ".lease"


def encode_entry(pos: int, idxs: list[int] | None) -> bytes:
    """One ack-log entry: ``idxs`` of the chunk at ``pos`` (None: all of them)."""
    if idxs is None:
        head = _HEAD.pack(pos, WHOLE)
    else:
        head = _HEAD.pack(pos, len(idxs)) + struct.pack(f">{len(idxs)}I", *idxs)
    return head + _U32.pack(crc32c(head))


def fsync_dir(path: str) -> None:
    """Make the names in the folder ``path`` durable (a file created or renamed there)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_sync = getattr(os, "fdatasync", os.fsync)


class AckLogs:
    """What every ack log in ``folder`` says, per segment stem and chunk position, and this
    life's own logs (written here, applied at once, never read back)."""

    def __init__(self, folder: str, life: str, sync: bool) -> None:
        self.folder, self.life, self.sync = folder, life, sync
        self._whole: dict[str, set[int]] = {}            # stem -> positions all acked
        self._part: dict[str, dict[int, set[int]]] = {}  # stem -> position -> indexes
        self._fds: dict[str, int] = {}       # others' logs -> open descriptor
        self._read: dict[str, int] = {}      # others' logs -> bytes applied
        self._legacy: set[str] = set()       # earlier format's files already read
        self._own: dict[str, int] = {}       # stem -> this life's log for it
        self._end: dict[str, int] = {}       # stem -> where its next entry goes
        self._room: dict[str, int] = {}      # stem -> bytes preallocated (sync only)

    # ------------------------------------------------------------------ reading
    def refresh(self) -> None:
        """Apply what the other lives appended since the last look."""
        try:
            names = os.listdir(self.folder)
        except FileNotFoundError:
            names = []
        present = set(names)
        for name in names:
            if name.endswith(_LOG):
                stem, sep, life = name[:-len(_LOG)].rpartition("~")
                if sep and life != self.life:
                    self._read_log(name, stem)
            elif "@" in name and name not in self._legacy and not name.endswith(".tmp"):
                self._read_legacy(name)
        for name in [n for n in self._fds if n not in present]:   # its segment was dropped
            os.close(self._fds.pop(name))
            self._read.pop(name, None)
        self._legacy &= present

    def _read_log(self, name: str, stem: str) -> None:
        fd = self._fds.get(name)
        if fd is None:
            try:
                fd = os.open(os.path.join(self.folder, name), os.O_RDONLY)
            except FileNotFoundError:
                return
            self._fds[name] = fd
        done = self._read.get(name, 0)
        size = os.fstat(fd).st_size
        window = _WINDOW
        while done < size:      # a preallocated log's zeros end what is read, as a torn tail
            data = os.pread(fd, min(size - done, window), done)
            used, need = self._apply(stem, data)
            done += used
            if used == 0:
                # one entry larger than the window: read it whole; else (a zero or torn
                # entry, or one still being written) the end for now
                if len(data) < need <= size - done:
                    window = need
                    continue
                break
            if len(data) < window:
                break
        self._read[name] = done

    def _apply(self, stem: str, data: bytes) -> tuple[int, int]:
        """Apply the complete entries at the start of ``data``: how many bytes they are, and
        the length of the entry after them when ``data`` ends inside it (else 0)."""
        p, n = 0, len(data)
        whole = self._whole.setdefault(stem, set())
        part = self._part.setdefault(stem, {})
        while p + _HEAD.size <= n:
            pos, k = _HEAD.unpack_from(data, p)
            body = 0 if k == WHOLE else 4 * k
            end = p + _HEAD.size + body + 4
            if end > n:         # still being written (or torn): read again next time
                return p, end - p
            if crc32c(data[p:end - 4]) != _U32.unpack_from(data, end - 4)[0]:
                break
            if k == WHOLE:
                whole.add(pos)
                part.pop(pos, None)
            elif pos not in whole:
                part.setdefault(pos, set()).update(
                    struct.unpack_from(f">{k}I", data, p + _HEAD.size))
            p = end
        return p, (_HEAD.size + 4 if p + _HEAD.size > n > p else 0)

    def _read_legacy(self, name: str) -> None:
        stem, _, pos = name.rpartition("@")
        if not pos.isdigit():
            return
        try:
            with open(os.path.join(self.folder, name), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        self._legacy.add(name)
        k = len(data) // 4
        if k and int(pos) not in self._whole.get(stem, ()):
            self._part.setdefault(stem, {}).setdefault(int(pos), set()).update(
                i for (i,) in _U32.iter_unpack(data[:k * 4]))

    def acked(self, stem: str, pos: int) -> set[int] | None:
        """The acknowledged indexes of a chunk (None: all of them)."""
        if pos in self._whole.get(stem, ()):
            return None
        return self._part.get(stem, {}).get(pos, set())

    def left(self, stem: str, pos: int, count: int) -> int:
        """How many of the chunk's ``count`` messages are not acknowledged."""
        if pos in self._whole.get(stem, ()):
            return 0
        return max(0, count - len(self._part.get(stem, {}).get(pos, ())))

    # ------------------------------------------------------------------ writing
    def write(self, stem: str, entries: Iterable[tuple[int, list[int] | None]]) -> None:
        """Append ``entries`` (position, indexes or None: all) to this life's log of the
        segment ``stem``, synced when this store syncs acks; applied here at once."""
        fd = self._own.get(stem)
        if fd is None:
            fd = os.open(os.path.join(self.folder, f"{stem}~{self.life}{_LOG}"),
                         os.O_WRONLY | os.O_CREAT, 0o644)
            self._own[stem] = fd
            self._end[stem] = self._room[stem] = 0
            if self.sync:           # the new name must outlive a crash as the acks do
                self._grow(stem, fd, 1)
                fsync_dir(self.folder)
        data = b""
        whole = self._whole.setdefault(stem, set())
        part = self._part.setdefault(stem, {})
        for pos, idxs in entries:
            data += encode_entry(pos, idxs)
            if idxs is None:
                whole.add(pos)
                part.pop(pos, None)
            elif pos not in whole:
                part.setdefault(pos, set()).update(idxs)
        end = self._end[stem]
        if self.sync and end + len(data) > self._room[stem]:
            self._grow(stem, fd, len(data))
        view = memoryview(data)
        while view:
            n = os.pwrite(fd, view, end)
            view, end = view[n:], end + n
        self._end[stem] = end
        if self.sync:
            _sync(fd)

    def _grow(self, stem: str, fd: int, need: int) -> None:
        """Write (and sync) zeros past the log's room: acks then overwrite blocks already
        there and the file keeps its size, so their fdatasync commits no file-system
        journal (which would wait behind the other processes' fsyncs)."""
        room = self._room[stem]
        add = max(_PREALLOC, need)
        os.pwrite(fd, bytes(add), room)
        os.fsync(fd)
        self._room[stem] = room + add

    def writes(self, stem: str) -> bool:
        """Whether this life has a log of ``stem`` open."""
        return stem in self._own

    def forget(self, stem: str) -> None:
        """The segment ``stem`` is gone: drop what is known of it and close its log."""
        self._whole.pop(stem, None)
        self._part.pop(stem, None)
        fd = self._own.pop(stem, None)
        if fd is not None:
            os.close(fd)
        self._end.pop(stem, None)
        self._room.pop(stem, None)

    def stems(self) -> list[str]:
        return list(self._whole.keys() | self._part.keys() | self._own.keys())

    def close(self) -> None:
        for fd in [*self._own.values(), *self._fds.values()]:
            os.close(fd)
        self._own.clear()
        self._fds.clear()
        self._read.clear()


class LeaseTables:
    """This life's lease table in ``folder`` and a reader of everyone's."""

    def __init__(self, folder: str, life: str) -> None:
        self.folder, self.life = folder, life
        self.name = life + _TABLE
        self.mine: dict[str, int] = {}   # chunk -> expires_ms, as the next write puts it
        self._fd = -1
        self._size = 0

    @staticmethod
    def _parse(data: bytes) -> dict[str, int]:
        out = {}
        for line in data.decode("ascii", "replace").splitlines():
            chunk, _, exp = line.partition(" ")
            if exp.isdigit():
                out[chunk] = int(exp)
        return out

    def _tables(self, now: int, clean: bool) -> dict[str, int]:
        """Every other life's live lease, chunk -> expires_ms. ``clean`` (the lock held):
        remove the tables with no live lease and the earlier format's expired leases."""
        out: dict[str, int] = {}
        try:
            names = os.listdir(self.folder)
        except FileNotFoundError:
            return out
        for name in names:
            if name == self.name or name.endswith(".tmp"):
                continue
            path = os.path.join(self.folder, name)
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                continue
            if name.endswith(_TABLE):
                live = {c: e for c, e in self._parse(data).items() if e > now}
            else:       # an earlier store's lease of one chunk: "<owner> <expires_ms>"
                _owner, _, exp = data.decode("ascii", "replace").strip().partition(" ")
                live = {name: int(exp)} if exp.isdigit() and int(exp) > now else {}
            if not live and clean:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
            for c, e in live.items():
                if out.get(c, 0) < e:
                    out[c] = e
        return out

    def others(self, now: int) -> dict[str, int]:
        """The other lives' live leases (call with the store's lock held)."""
        return self._tables(now, clean=True)

    def live(self, now: int) -> set[str]:
        """Every chunk under a live lease, this life's included (no lock: for counts)."""
        return set(self._tables(now, clean=False)) | {c for c, e in self.mine.items() if e > now}

    def write(self) -> None:
        """Put ``mine`` in this life's table (call with the store's lock held)."""
        if self._fd >= 0 and os.fstat(self._fd).st_nlink == 0:
            os.close(self._fd)      # removed as dead while we stalled: write it anew
            self._fd = -1
        if self._fd < 0:
            self._fd = os.open(os.path.join(self.folder, self.name), os.O_RDWR | os.O_CREAT,
                               0o644)
            self._size = os.fstat(self._fd).st_size
        data = "".join(f"{c} {e}\n" for c, e in self.mine.items()).encode()
        if data:
            os.pwrite(self._fd, data, 0)
        if len(data) < self._size:
            os.ftruncate(self._fd, len(data))
        self._size = len(data)

    def close(self) -> None:
        """Remove this life's table (call with the store's lock held)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            try:
                os.unlink(os.path.join(self.folder, self.name))
            except FileNotFoundError:
                pass
        self.mine.clear()
