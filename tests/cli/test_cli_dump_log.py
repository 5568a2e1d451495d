"""``kcodec dump-log``: tables, JSON lines, records, indexes, verification and exit codes."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import kcodec
from kcodec.cli import dump_log, main
from tests.support.segments import (
    META_LOG,
    TOPIC_LOG,
    broker_index_entries,
    fix_crc,
    index_bytes,
    legacy_message,
    reference,
    shallow_scan,
    simple_batches,
    timeindex_bytes,
    v2_batch,
    write_segment,
)

# the kcodec under test (a source tree or an installed wheel) for `python -m kcodec`
KCODEC_ROOT = str(Path(kcodec.__file__).resolve().parent.parent)


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main(["dump-log", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def jsonl(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.reference
def test_table_on_the_topic_segment(capsys) -> None:
    path = reference(TOPIC_LOG)
    code, out, err = run(capsys, path)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"Dumping {path}"
    header = lines[2].split()
    assert header[:6] == ["baseOffset", "lastOffset", "count", "position", "tsType",
                          "maxTimestamp"]
    assert "isValid" in header and "isControl" in header and "codec" in header
    rows = [dict(zip(header, line.split(), strict=False)) for line in lines[3:6]]
    assert [r["position"] for r in rows] == ["0", "1901", "2877"]
    assert [r["size"] for r in rows] == ["1901", "976", "394"]
    assert [r["producerId"] for r in rows] == ["1", "2", "3"]
    assert all(r["isValid"] == "true" and r["codec"] == "none" and r["magic"] == "2"
               and r["tsType"] == "CreateTime" and r["isControl"] == "false" for r in rows)
    assert rows[2]["maxTimestamp"] == "1769793578165"
    assert "Batches: 3, records: 3" in out
    assert "Recovery: OK: 3 batches, 3 records, offsets 0-2; all 3271 bytes valid" in out
    assert "Last valid offset: 2, truncate at position 3271" in out


@pytest.mark.reference
def test_records_on_the_topic_segment(capsys) -> None:
    code, out, _ = run(capsys, reference(TOPIC_LOG), "--records", "--max-bytes", "20")
    assert code == 0
    recs = [line for line in out.splitlines() if line.startswith("| offset:")]
    assert len(recs) == 3
    assert recs[0].startswith("| offset: 0 CreateTime: 1769792698283 keySize: -1 valueSize: 1831")
    # one line per record: \r\n escaped, the value cut at 20 bytes
    assert 'key: null value: {\\r\\n  "resourceType" ...(+1811 bytes)' in recs[0]
    code, out, _ = run(capsys, reference(TOPIC_LOG), "--records", "--max-bytes", "0")
    assert "value:" not in out and "valueSize: 906" in out


@pytest.mark.reference
def test_json_on_the_metadata_segment(capsys) -> None:
    code, out, _ = run(capsys, reference(META_LOG), "--json")
    assert code == 0
    objs = jsonl(out)
    batches = [o for o in objs if o["type"] == "batch"]
    expected, _ = shallow_scan(reference(META_LOG).read_bytes())
    assert len(batches) == 4814
    assert [(b["position"], b["base_offset"], b["last_offset"], b["size"], b["crc_valid"])
            for b in batches] == [(e.position, e.base_offset, e.last_offset, e.size, True)
                                  for e in expected]
    assert batches[0]["is_control"] is True and batches[0]["compression"] == "none"
    assert batches[0]["last_sequence"] == -1 and batches[0]["producer_id"] == -1
    summary = objs[-1]
    assert summary["type"] == "summary" and summary["ok"] is True
    assert (summary["batches"], summary["records"], summary["last_valid_offset"],
            summary["valid_bytes"], summary["reason"]) == (4814, 4929, 4928, 353439, None)


def test_json_records_bytes_modes(tmp_path: Path, capsys) -> None:
    log = write_segment(tmp_path, 0, [v2_batch(0, [(77, b"\x00k", b"h\xffi", [("h", None),
                                                                             ("g", b"1")])])])
    code, out, _ = run(capsys, log, "--json", "--records")
    assert code == 0
    rec = [o for o in jsonl(out) if o["type"] == "record"][0]
    assert base64.b64decode(rec["key"]) == b"\x00k" and base64.b64decode(rec["value"]) == b"h\xffi"
    assert rec["headers"] == [["h", None], ["g", base64.b64encode(b"1").decode()]]
    assert (rec["offset"], rec["timestamp"], rec["batch_position"]) == (0, 77, 0)
    assert (rec["key_size"], rec["value_size"]) == (2, 3)
    _, out, _ = run(capsys, log, "--json", "--records", "--bytes", "hex")
    rec = [o for o in jsonl(out) if o["type"] == "record"][0]
    assert (rec["key"], rec["value"]) == ("006b", "68ff69")
    _, out, _ = run(capsys, log, "--json", "--records", "--bytes", "text")
    rec = [o for o in jsonl(out) if o["type"] == "record"][0]
    assert (rec["key"], rec["value"]) == ("\x00k", "h\\xffi")


@pytest.mark.reference
def test_control_record_rendering(capsys) -> None:
    code, out, _ = run(capsys, reference(META_LOG), "--records", "--json")
    first = [o for o in jsonl(out) if o["type"] == "record"][0]
    assert first["control"] == {"type": "LEADER_CHANGE", "coordinator_epoch": None}
    code, out, _ = run(capsys, reference(META_LOG), "--records", "--no-mmap")
    assert "| offset: 0 CreateTime: 1769791434349 keySize: 4 valueSize: 19 control: " \
           "LEADER_CHANGE" in out


@pytest.mark.reference
def test_verify_real_segments(capsys) -> None:
    code, out, _ = run(capsys, reference(META_LOG), reference(TOPIC_LOG), "--verify")
    assert code == 0
    assert out.count("Recovery: OK") == 2
    assert "baseOffset" not in out               # no table when only verifying


def crc_damaged(tmp_path: Path) -> tuple[Path, list[bytes]]:
    parts = simple_batches(n_batches=3, per_batch=2)
    data = bytearray(b"".join(parts))
    data[len(parts[0]) + 70] ^= 1
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(bytes(data))
    return log, parts


def test_corrupt_crc_exit_1(tmp_path: Path, capsys) -> None:
    log, parts = crc_damaged(tmp_path)
    code, out, _ = run(capsys, log)
    assert code == 1
    valid = [line.split()[10] for line in out.splitlines()[3:6]]
    assert valid == ["true", "false", "true"]
    assert "Batches: 3 (1 with a bad CRC), records: 6" in out
    assert "Recovery: CORRUPT: 1 batches, 2 records, offsets 0-1; checksum mismatch" in out
    assert f"truncate at position {len(parts[0])}" in out
    code, out, _ = run(capsys, log, "--json")
    summary = jsonl(out)[-1]
    assert (code, summary["ok"], summary["crc_errors"], summary["truncate_at"],
            summary["last_valid_offset"], summary["reason"]) == (
        1, False, 1, len(parts[0]), 1, "checksum mismatch")


def test_torn_tail_and_garbage_exit_1(tmp_path: Path, capsys) -> None:
    parts = simple_batches(n_batches=2)
    torn = write_segment(tmp_path, 0, [parts[0], parts[1][:-5]])
    code, out, _ = run(capsys, torn)
    assert code == 1 and "incomplete batch" in out
    assert f"Trailing bytes: {len(parts[1]) - 5} at position {len(parts[0])} " \
           "(incomplete batch)" in out
    assert f"truncate at position {len(parts[0])}" in out
    zeros = tmp_path / "zeros.log"
    zeros.write_bytes(b"".join(parts) + bytes(4096))
    code, out, _ = run(capsys, zeros, "--json")
    summary = jsonl(out)[-1]
    assert (code, summary["trailing_bytes"], summary["reason"]) == (1, 4096, "zero-filled tail")
    junk = tmp_path / "junk.log"
    junk.write_bytes(parts[0] + struct.pack(">qi", 9, 3) + b"abc")
    code, out, _ = run(capsys, junk, "--json")
    objs = jsonl(out)
    assert code == 1 and [o["type"] for o in objs] == ["batch", "error", "summary"]
    assert objs[1]["reason"] == "corrupt batch" and objs[2]["truncate_at"] == len(parts[0])


def test_empty_and_missing_files(tmp_path: Path, capsys) -> None:
    empty = write_segment(tmp_path, 0, [])
    code, out, _ = run(capsys, empty)
    assert code == 0 and "Batches: 0, records: 0" in out and "Recovery: OK" in out
    code, out, err = run(capsys, tmp_path / "missing.log", empty)
    assert code == 1 and "missing.log" in err and "No such file" in err
    assert "Recovery: OK" in out                 # the other file was still dumped


def test_usage_errors_exit_2(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["dump-log"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["dump-log", "--bytes", "rot13", "x.log"])
    assert exc.value.code == 2


@pytest.mark.reference
def test_index_files(tmp_path: Path, capsys) -> None:
    src = reference(META_LOG)
    log = tmp_path / src.name
    shutil.copyfile(src, log)
    offsets, times = broker_index_entries(shallow_scan(log.read_bytes())[0])
    log.with_suffix(".index").write_bytes(index_bytes(offsets, 0) + bytes(80))
    log.with_suffix(".timeindex").write_bytes(timeindex_bytes(times, 0))
    code, out, _ = run(capsys, log.with_suffix(".index"), log.with_suffix(".timeindex"))
    assert code == 0
    assert f"offset: {offsets[0][0]} position: {offsets[0][1]}" in out
    assert f"timestamp: {times[-1][0]} offset: {times[-1][1]}" in out
    assert "zero-filled tail: 80 bytes" in out and out.count("Index: OK") == 2
    code, out, _ = run(capsys, log.with_suffix(".index"), "--json")
    objs = jsonl(out)
    assert [(o["offset"], o["position"]) for o in objs[:-1]] == offsets
    assert objs[-1]["type"] == "index_summary" and objs[-1]["ok"] is True
    # --verify on the log also checks both indexes beside it
    code, out, _ = run(capsys, log, "--verify")
    assert code == 0
    # an index that disagrees with its log
    bad = offsets[:3] + [(offsets[3][0] + 1, offsets[3][1])]
    log.with_suffix(".index").write_bytes(index_bytes(bad, 0))
    code, out, _ = run(capsys, log.with_suffix(".index"))
    assert code == 1 and "index problem" in out and "last offset" in out
    code, out, _ = run(capsys, log, "--verify")
    assert code == 1 and "index problem" in out


def test_index_without_log(tmp_path: Path, capsys) -> None:
    p = tmp_path / "00000000000000000010.index"
    p.write_bytes(index_bytes([(15, 4100), (30, 8200)], 10))
    code, out, _ = run(capsys, p)
    assert code == 0 and "offset: 15 position: 4100" in out and "no .log beside it" in out


def test_python_dash_m(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=KCODEC_ROOT)
    parts = simple_batches(n_batches=3)
    log = write_segment(tmp_path, 0, parts)
    proc = subprocess.run([sys.executable, "-m", "kcodec", "dump-log", "--json", str(log)],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    objs = jsonl(proc.stdout)
    assert [o["type"] for o in objs] == ["batch"] * 3 + ["summary"]
    damaged, _ = crc_damaged(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "kcodec", "dump-log", str(damaged)],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 1 and "CORRUPT" in proc.stdout
    if os.path.exists("/dev/stdin"):
        # a pipe on stdin: read, not mapped; offsets from the batches
        proc = subprocess.run([sys.executable, "-m", "kcodec", "dump-log", "--json",
                               "/dev/stdin"], input=b"".join(parts), capture_output=True,
                              cwd=tmp_path, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert jsonl(proc.stdout.decode())[-1]["records"] == 6
    proc = subprocess.run([sys.executable, "-m", "kcodec", "dump-log", "--nope"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 2


@pytest.mark.reference
def test_python_dash_m_real_segment(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=KCODEC_ROOT)
    proc = subprocess.run([sys.executable, "-m", "kcodec", "dump-log", "--verify",
                           str(reference(META_LOG)), str(reference(TOPIC_LOG))],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("Recovery: OK") == 2


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    bar = dump_log.Progress(100 << 20, FakeTTY(), "x.log", width=10, interval=0)
    bar.update(50 << 20)
    bar.close()
    text = bar.stream.getvalue()
    assert "x.log [#####.....]  50.0% 50/100 MiB" in text and text.endswith("\r\x1b[K")
    # through the command: only for large files on a terminal, never on stdout
    log = write_segment(tmp_path, 0, simple_batches(n_batches=50))
    tty = FakeTTY()
    monkeypatch.setattr(dump_log, "PROGRESS_MIN_BYTES", 1)
    monkeypatch.setattr(sys, "stderr", tty)
    assert main(["dump-log", str(log)]) == 0
    assert "[" in tty.getvalue() and "MiB" in tty.getvalue()
    assert "MiB" not in capsys.readouterr().out
    tty2 = FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty2)
    assert main(["dump-log", "--no-progress", str(log)]) == 0
    assert tty2.getvalue() == ""


def test_render_bytes() -> None:
    r = dump_log.render_bytes
    assert r(None) == "null" and r(b"") == ""
    assert r(b"plain text") == "plain text"
    assert r("héllo\n".encode()) == "héllo\\n"
    assert r(b"\x00\xff\\") == "\\x00\\xff\\\\"
    assert r(b"abcdef", 3) == "abc...(+3 bytes)"
    assert dump_log.last_sequence(-1, 5) == -1
    assert dump_log.last_sequence(10, 5) == 15
    assert dump_log.last_sequence(2**31 - 2, 3) == 1      # wraps like Kafka's


def test_bad_record_found_by_verify(tmp_path: Path, capsys) -> None:
    parts = simple_batches(n_batches=3, per_batch=2)
    bad = bytearray(parts[1])
    struct.pack_into(">i", bad, 57, 3)           # 3 records claimed, 2 present; CRC fixed
    fix_crc(bad)
    log = write_segment(tmp_path, 0, [parts[0], bytes(bad), parts[2]])
    code, out, _ = run(capsys, log)               # batches only: nothing wrong to see
    assert code == 0
    code, out, _ = run(capsys, log, "--verify", "--json")
    objs = jsonl(out)
    assert code == 1 and [o["type"] for o in objs] == ["error", "summary"]
    assert objs[0]["reason"] == "bad record" and objs[0]["position"] == len(parts[0])
    summary = objs[1]
    assert (summary["truncate_at"], summary["last_valid_offset"], summary["reason"],
            summary["record_errors"]) == (len(parts[0]), 1, "bad record", 1)
    code, out, _ = run(capsys, log, "--records")
    assert code == 1 and "ERROR (bad record)" in out


def test_kafka_format(tmp_path: Path, capsys) -> None:
    parts = [v2_batch(0, [(10, None, b"hello", [("h", b"1")])], producer_id=5, producer_epoch=1,
                      base_sequence=7, transactional=True),
             legacy_message(1, 1, 20, b"k", b"v", codec=1)]
    log = write_segment(tmp_path, 0, parts)
    code, out, _ = run(capsys, log, "--kafka", "--records")
    assert code == 0
    lines = out.splitlines()
    crc0 = struct.unpack_from(">I", parts[0], 17)[0]
    assert lines[2] == (
        "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: 7 lastSequence: 7 producerId: 5 "
        "producerEpoch: 1 partitionLeaderEpoch: 0 isTransactional: true isControl: false "
        f"deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 10 size: {len(parts[0])} "
        f"magic: 2 compresscodec: none crc: {crc0} isvalid: true")
    assert lines[3] == ("| offset: 0 CreateTime: 10 keySize: -1 valueSize: 5 sequence: 7 "
                        "headerKeys: [h] payload: hello")
    assert lines[4].startswith(f"offset: 1 position: {len(parts[0])} CreateTime: ")
    assert " magic: 1 compresscodec: gzip " in lines[4] and lines[4].endswith("isvalid: true")
    assert lines[5] == "| offset: 1 CreateTime: 20 keySize: 1 valueSize: 1 key: k payload: v"


def test_directory_argument(tmp_path: Path, capsys) -> None:
    write_segment(tmp_path, 0, simple_batches(first_offset=0, n_batches=2),
                  index=b"", timeindex=b"")
    write_segment(tmp_path, 4, simple_batches(first_offset=4, n_batches=1))
    code, out, _ = run(capsys, tmp_path, "--json")
    summaries = [o for o in jsonl(out) if o["type"] == "summary"]
    assert code == 0 and [Path(o["file"]).name for o in summaries] == [
        "00000000000000000000.log", "00000000000000000004.log"]
    assert [o["last_valid_offset"] for o in summaries] == [3, 5]
    empty = tmp_path / "empty-dir"
    empty.mkdir()
    code, _, err = run(capsys, empty)
    assert code == 1 and "empty-dir" in err



def test_broker_data_dir_finds_the_partition_logs(tmp_path: Path, capsys) -> None:
    """A kcodec broker's data dir keeps its segments under logs/<topic>-<partition>/."""
    from kcodec.broker import Cluster
    from kcodec.client import Producer

    with Cluster(1, data_dir=tmp_path) as c:
        c.create_topic("a", 1)
        c.create_topic("b", 2)
        with Producer(bootstrap_servers=c.bootstrap) as p:
            for topic, part in (("a", 0), ("b", 0), ("b", 1), ("b", 1)):
                p.send(topic, b"x", partition=part).result(10)
    code, out, err = run(capsys, "--json", "--verify", tmp_path)
    assert code == 0, err
    rows = jsonl(out)
    files = [r["file"] for r in rows if "file" in r]
    assert files == sorted(set(files), key=files.index)
    parts = [os.path.basename(os.path.dirname(f)) for f in dict.fromkeys(files)]
    assert parts == ["a-0", "b-0", "b-1"]
    assert all(os.path.dirname(os.path.dirname(f)) == str(tmp_path / "logs") for f in files)
