"""The file store's own layout: ack logs and lease tables (no file per chunk in the steady
state), a torn ack-log tail, leases of live and dead lives, a store of the earlier format
(a file per chunk's acks and lease) read and drained, and a backlog that reads only what
is new."""

from __future__ import annotations

import os
import struct
import time

from kcodec.runtime.message import Message
from kcodec.runtime.storage import file as file_mod
from kcodec.runtime.storage.file import FileStore
from kcodec.runtime.storage.file_state import encode_entry


def msgs(n: int, start: int = 0) -> list[Message]:
    return [Message("t", 0, i, 1_700_000_000_000 + i, 0, b"k%d" % i, b"v%d" % i, [])
            for i in range(start, start + n)]


def offsets(claim) -> list[int]:
    return sorted(m.offset for m in claim.messages)


def test_the_steady_state_creates_and_deletes_no_file_per_chunk(tmp_path, monkeypatch) -> None:
    w = FileStore(str(tmp_path), "p0")
    s = FileStore(str(tmp_path), "s0")
    for i in range(3):                  # warm up: the first ack log and lease table
        w.append(msgs(5, 5 * i))
        c = s.claim(5)
        s.ack(c, c.refs)
    created, unlinked = [], []
    real_open, real_unlink = os.open, os.unlink

    def counting_open(path, flags, *a, **k):
        if flags & os.O_CREAT:
            created.append(path)
        return real_open(path, flags, *a, **k)

    def counting_unlink(path, *a, **k):
        unlinked.append(path)
        return real_unlink(path, *a, **k)

    monkeypatch.setattr(os, "open", counting_open)
    monkeypatch.setattr(os, "unlink", counting_unlink)
    got = []
    for i in range(3, 43):
        w.append(msgs(5, 5 * i))
        c = s.claim(5)
        got += offsets(c)
        s.ack(c, c.refs[:2])            # a partial ack, then the rest: both in the log
        s.ack(c, c.refs)
    assert got == list(range(15, 215))
    assert [p for p in created if "pending" not in p] == [] and unlinked == []
    assert len(os.listdir(tmp_path / "acks")) == 1
    assert len(os.listdir(tmp_path / "leases")) == 1
    assert s.claim(5) is None
    assert FileStore(str(tmp_path), "ctl").backlog()["pending"] == 0


def test_a_torn_ack_log_tail_is_ignored_until_it_is_complete(tmp_path) -> None:
    w = FileStore(str(tmp_path), "p0")
    for i in range(3):
        w.append(msgs(4, 4 * i))
    s = FileStore(str(tmp_path), "s0")
    c = s.claim(4)
    s.ack(c, c.refs)                    # chunk 0: one whole entry
    (log,) = os.listdir(tmp_path / "acks")
    stem = log.partition("~")[0]
    pos1 = int(s.claim(4).lease.rpartition("@")[2])   # chunk 1 is held, not acked
    entry = encode_entry(pos1, [0, 1])
    path = tmp_path / "acks" / log
    at = len(encode_entry(0, None))     # after chunk 0's entry, in the preallocated zeros

    def put(data: bytes, where: int) -> None:
        with open(path, "r+b") as f:
            f.seek(where)
            f.write(data)

    put(entry[:-3], at)                 # a crash mid-write: not all there
    ctl = FileStore(str(tmp_path), "ctl")
    assert ctl.backlog() == {"pending": 4, "delayed": 0, "processing": 4, "failed": 0}
    put(entry[-3:], at + len(entry) - 3)    # now it is: read from where the reader stopped
    assert ctl.backlog() == {"pending": 4, "delayed": 0, "processing": 2, "failed": 0}
    bad = bytearray(encode_entry(pos1, [2]))
    bad[-1] ^= 0xFF                     # complete but its CRC does not match: not applied
    put(bytes(bad), at + len(entry))
    assert ctl.backlog()["processing"] == 2
    assert stem + ".open" in os.listdir(tmp_path / "pending")


def test_a_live_lease_is_respected_and_an_expired_one_taken_over(tmp_path) -> None:
    w = FileStore(str(tmp_path), "p0")
    w.append(msgs(6))
    a = FileStore(str(tmp_path), "s0", lease_ms=600)
    b = FileStore(str(tmp_path), "s1", lease_ms=600)
    ca = a.claim(10)
    a.ack(ca, ca.refs[:2])
    for _ in range(3):                  # a renews: b never gets it
        time.sleep(0.3)
        a.renew()
        assert b.claim(10) is None
    time.sleep(0.8)                     # a stalls past its lease
    cb = b.claim(10)
    assert cb is not None and offsets(cb) == [2, 3, 4, 5]
    assert os.listdir(tmp_path / "leases") == [b._leases.name]   # a's dead table removed
    a.renew()                           # a comes back: it sees b holds it and leaves it be
    time.sleep(0.3)
    b.renew()
    time.sleep(0.4)                     # past a's renewal, within b's
    c = FileStore(str(tmp_path), "s2", lease_ms=600)
    assert c.claim(10) is None
    assert c.backlog()["processing"] == 4
    b.ack(cb, cb.refs)
    a.ack(ca, ca.refs)                  # late acks of the old holder: harmless
    assert c.claim(10) is None and c.backlog()["processing"] == 0
    for s in (a, b, c):
        s.close()
    assert os.listdir(tmp_path / "leases") == []


def test_a_store_of_the_earlier_format_is_read_and_drained(tmp_path) -> None:
    """acks/<chunk> and leases/<chunk> files, as the store wrote them before ack logs: the
    acknowledged messages are not handed out again, a live lease is honoured until it
    expires, and the segment is deleted once drained, with the old files."""
    w = FileStore(str(tmp_path), "p0")
    for i in range(4):
        w.append(msgs(5, 5 * i))
    w.close()                           # sealed, as a stopped runtime leaves it
    (seg,) = os.listdir(tmp_path / "pending")
    stem = seg.rpartition(".")[0]
    scan = FileStore(str(tmp_path), "scan")
    pos = [ch.pos for ch in scan._chunks(seg, 0)]
    (tmp_path / "acks" / f"{stem}@{pos[0]}").write_bytes(struct.pack(">5I", 0, 1, 2, 3, 4))
    (tmp_path / "acks" / f"{stem}@{pos[1]}").write_bytes(struct.pack(">2I", 4, 1))
    soon = int(time.time() * 1000) + 700
    (tmp_path / "leases" / f"{stem}@{pos[2]}").write_bytes(f"s0:1:ab {soon}\n".encode())
    s = FileStore(str(tmp_path), "s1")
    assert s.backlog() == {"pending": 8, "delayed": 0, "processing": 5, "failed": 0}
    c1 = s.claim(5)
    assert offsets(c1) == [5, 7, 8]     # chunk 1 without what was acknowledged
    s.ack(c1, c1.refs)
    c3 = s.claim(5)
    assert offsets(c3) == [15, 16, 17, 18, 19]   # chunk 2 is leased: chunk 3 first
    s.ack(c3, c3.refs)
    assert s.claim(5) is None
    time.sleep(0.9)                     # the old lease expires
    c2 = s.claim(5)
    assert offsets(c2) == [10, 11, 12, 13, 14]
    s.ack(c2, c2.refs)
    assert s.claim(5) is None           # all acknowledged: the segment and its files go
    assert os.listdir(tmp_path / "pending") == []
    assert os.listdir(tmp_path / "acks") == []
    assert [f for f in os.listdir(tmp_path / "leases") if "@" in f] == []


def test_backlog_reads_only_what_was_appended_since(tmp_path, monkeypatch) -> None:
    w = FileStore(str(tmp_path), "p0")
    for i in range(50):
        w.append(msgs(2, 2 * i))
    p = FileStore(str(tmp_path), "p1")
    assert p.backlog()["pending"] == 100
    reads = []
    real = file_mod._read_chunk_header
    monkeypatch.setattr(file_mod, "_read_chunk_header",
                        lambda f, pos, size: reads.append(pos) or real(f, pos, size))
    assert p.backlog()["pending"] == 100
    assert len(reads) <= 1              # the open segment's tail: nothing new there
    w.append(msgs(2, 100))
    reads.clear()
    assert p.backlog()["pending"] == 102
    assert len(reads) <= 2


def test_a_synced_ack_log_is_preallocated_and_grows_past_its_room(tmp_path, monkeypatch) -> None:
    """Under --fsync always an ack overwrites zeros written ahead (its fdatasync then
    commits no journal); past that room more zeros are written, and every reader still
    finds every entry."""
    from kcodec.runtime.storage import file_state

    monkeypatch.setattr(file_state, "_PREALLOC", 64)   # four whole-chunk entries
    monkeypatch.setattr(file_state, "_WINDOW", 32)     # and reads of two at a time
    w = FileStore(str(tmp_path), "p0")
    s = FileStore(str(tmp_path), "s0")
    ctl = FileStore(str(tmp_path), "ctl")
    for i in range(10):
        w.append(msgs(3, 3 * i))
        c = s.claim(3)
        if i == 4:
            s.ack(c, c.refs[:1])        # a partial entry too
        s.ack(c, c.refs)
        assert ctl.backlog()["pending"] == 0
    (log,) = os.listdir(tmp_path / "acks")
    assert os.path.getsize(tmp_path / "acks" / log) % 64 == 0
    assert FileStore(str(tmp_path), "late").claim(10) is None


def test_the_ack_logs_of_a_segment_that_is_gone_are_removed(tmp_path) -> None:
    # a crash between a segment's delete and its ack logs' leaves the logs: the next
    # claim of any process removes them (and keeps the logs of a segment still there)
    w = FileStore(str(tmp_path), "p0")
    s = FileStore(str(tmp_path), "s0")
    w.append(msgs(5))
    w._pending.seal()
    w.append(msgs(5, 5))                # a second segment, still open
    c = s.claim(5)
    assert offsets(c) == [0, 1, 2, 3, 4]
    s.ack(c, c.refs)
    (log,) = os.listdir(tmp_path / "acks")
    gone = next(f for f in os.listdir(tmp_path / "pending") if f.endswith(".seg"))
    assert log.startswith(gone.rsplit(".", 1)[0] + "~")
    os.unlink(tmp_path / "pending" / gone)          # the crash: the segment went, not its log
    s.close()
    other = FileStore(str(tmp_path), "s1")
    c = other.claim(5)
    assert offsets(c) == [5, 6, 7, 8, 9]
    assert os.listdir(tmp_path / "acks") == []
    other.ack(c, c.refs[:2])            # the open segment's log stays
    c2 = FileStore(str(tmp_path), "s2").claim(5)
    assert c2 is None                   # leased by s1 still
    (kept,) = os.listdir(tmp_path / "acks")
    assert not kept.startswith(gone.rsplit(".", 1)[0])


def test_a_look_at_an_idle_preallocated_log_reads_one_window(tmp_path, monkeypatch) -> None:
    # the zeros after the last entry are the end for now: a claim that finds nothing new
    # reads one window of them, not the whole preallocated room in ever larger reads
    w = FileStore(str(tmp_path), "p0")
    s = FileStore(str(tmp_path), "s0")
    w.append(msgs(3))
    w.append(msgs(3, 3))
    c = s.claim(3)
    s.ack(c, c.refs)
    other = FileStore(str(tmp_path), "s1")
    assert offsets(other.claim(3)) == [3, 4, 5]      # read s0's log once
    reads: list[int] = []
    real = os.pread

    def counting(fd, n, off):
        reads.append(n)
        return real(fd, n, off)

    monkeypatch.setattr(os, "pread", counting)
    assert other.claim(3) is None
    assert len(reads) == 1, reads
