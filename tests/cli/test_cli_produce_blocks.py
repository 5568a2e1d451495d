"""``kcodec produce`` a block of lines at a time (``Producer.send_values``), taken when
no line per record is printed (``-q``, or a terminal): the same records, keys and
partitions as line by line, the same stops and resume lines; and ``read_blocks``, the
reader beneath it."""

from __future__ import annotations

import io

import pytest

from kcodec.cli._io import TooLong, read_blocks, read_records
from tests.cli.harness import create, run, run_bytes


def _consume(broker, topic: str, *extra: str) -> str:
    rc, out, err, _ = run("consume", "-b", broker.bootstrap, "-t", topic, "-o", "beginning",
                          "-e", "-q", *extra)
    assert rc == 0, err
    return out


def test_quiet_produce_sends_every_line_in_order(kbroker) -> None:
    lines = b"".join(b"line %d\n" % i for i in range(30000)) + b"\n" + b"last, no newline"
    create(kbroker, "blk", 1)
    rc, out, err, _ = run_bytes("produce", "-q", "-b", kbroker.bootstrap, "-t", "blk", stdin=lines)
    assert rc == 0, err
    assert out == b""                           # no line per record
    assert "30002 records confirmed in 'blk'" in err
    got = _consume(kbroker, "blk").split("\n")
    assert got[:2] == ["line 0", "line 1"] and got[29999] == "line 29999"
    assert got[30000:] == ["", "last, no newline", ""]   # the blank line is an empty record


def test_quiet_produce_with_a_key_or_a_partition(kbroker) -> None:
    from kcodec.client.producer.partitioner import partition_for_key

    create(kbroker, "blk2", 3)
    rc, _, err, _ = run("produce", "-q", "-b", kbroker.bootstrap, "-t", "blk2", "-p", "2",
                        stdin=b"a\nb\n")
    assert rc == 0, err
    rc, _, err, _ = run("produce", "-q", "-b", kbroker.bootstrap, "-t", "blk2", "-k", "K",
                        stdin=b"c\n")
    assert rc == 0, err
    out = _consume(kbroker, "blk2", "--format", "text").splitlines()
    assert "2:0 a" in out and "2:1 b" in out
    p = partition_for_key(b"K", 3)          # the key's partition, as the Java client picks it
    assert f"{p}:{2 if p == 2 else 0} key=K c" in out


def test_quiet_produce_stops_at_a_long_line_with_the_resume_line(kbroker) -> None:
    create(kbroker, "blk3", 1)
    data = b"a\nb\n" + b"x" * 200 + b"\nc\n"
    rc, _, err, _ = run("produce", "-q", "--max-line-bytes", "100", "-b", kbroker.bootstrap,
                        "-t", "blk3", stdin=data)
    assert rc == 1
    assert "2 lines confirmed" in err and "line 3 is longer than 100 bytes" in err, err
    assert "(resume from line 3)" in err
    assert _consume(kbroker, "blk3") == "a\nb\n"


def test_each_prints_a_line_per_record(kbroker) -> None:
    create(kbroker, "blk4", 1)
    rc, out, err, _ = run("produce", "--each", "-b", kbroker.bootstrap, "-t", "blk4",
                          stdin=b"a\nb\n")
    assert rc == 0, err
    assert out == "partition 0 offset 0\npartition 0 offset 1\n"


def test_quiet_and_each_are_one_or_the_other(kbroker) -> None:
    rc, _, err, _ = run("produce", "-q", "--each", "-b", kbroker.bootstrap, "-t", "x")
    assert rc == 2 and "-q and --each" in err


@pytest.mark.parametrize("data", [b"", b"\n", b"a", b"a\n", b"a\n\nb", b"a\nb\n\n",
                                  b"\n".join(b"%d" % i for i in range(5000))])
@pytest.mark.parametrize("size", [1, 3, 64, 1 << 20])
def test_read_blocks_splits_as_read_records(data, size) -> None:
    want = list(read_records(io.BytesIO(data), b"\n", 1000))
    got = [line for block in read_blocks(io.BytesIO(data), b"\n", 1000, size) for line in block]
    assert got == want


def test_read_blocks_multi_byte_delimiter() -> None:
    data = b"a\r\nb\r\n\r\nc"
    got = [x for b in read_blocks(io.BytesIO(data), b"\r\n", 100, 2) for x in b]
    assert got == [b"a", b"b", b"", b"c"]


def test_read_blocks_gives_the_lines_before_a_long_one_then_raises() -> None:
    data = b"a\nb\n" + b"x" * 50 + b"\nc\n"
    blocks = read_blocks(io.BytesIO(data), b"\n", 10, 1 << 20)
    assert next(blocks) == [b"a", b"b"]
    with pytest.raises(TooLong):
        next(blocks)


def test_read_blocks_stops_a_line_without_end_before_reading_it_whole() -> None:
    class Endless(io.RawIOBase):
        def __init__(self) -> None:
            self.given = 0

        def readable(self) -> bool:
            return True

        def read1(self, n: int = -1) -> bytes:
            self.given += 4096
            return b"x" * 4096

    src = Endless()
    with pytest.raises(TooLong):
        list(read_blocks(src, b"\n", 100_000, 8192))
    assert src.given < 100_000 + 3 * 8192


def test_on_a_terminal_only_the_summary(kbroker) -> None:
    """stdout a terminal: no line per record (a flood of them is no use there), the summary
    and the progress line on stderr."""
    import os
    import pty
    import subprocess

    from tests.cli.harness import kcodec

    create(kbroker, "blk-tty", 1)
    master, slave = pty.openpty()
    p = kcodec("produce", "-b", kbroker.bootstrap, "-t", "blk-tty", stdin=subprocess.PIPE,
               stdout=slave, stderr=slave)
    os.close(slave)
    p.stdin.write(b"a\nb\nc\n")
    p.stdin.close()
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert p.wait(60) == 0
    shown = b"".join(chunks).decode()
    assert "partition 0 offset" not in shown
    assert "3 records confirmed in 'blk-tty'" in shown
    assert _consume(kbroker, "blk-tty") == "a\nb\nc\n"
