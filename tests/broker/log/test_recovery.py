"""Crash recovery and the command line: ``kcodec broker --data-dir`` is killed with SIGKILL
while a producer (acks=all) is writing; a restart on the same data dir has every
acknowledged record, valid CRCs, and a torn tail cut off. Ctrl-C (SIGINT) stops it cleanly."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from kcodec.records import iter_batches


def start(data_dir, *extra):
    proc = subprocess.Popen([sys.executable, "-m", "kcodec", "broker", "--data-dir", str(data_dir),
                             "--json", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise AssertionError(f"the broker did not start: {proc.stderr.read()}")
    return proc, json.loads(line)["bootstrap"]


def consume_all(bootstrap, topic, partitions, timeout=30):
    """Every record of ``topic``, read to the end offsets it has now. Not "until as many as
    were acknowledged": a crash can leave records on disk whose acknowledgement it cut off,
    and a count would stop short of the end by as many."""
    from kcodec.client import Admin, Consumer, TopicPartition

    tps = [TopicPartition(topic, i) for i in range(partitions)]
    with Admin(bootstrap_servers=bootstrap) as admin:
        ends = admin.list_offsets(tps, "latest")
    got = []
    left = {tp for tp in tps if ends[tp] > 0}
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign(tps)
        deadline = time.monotonic() + timeout
        while left and time.monotonic() < deadline:
            for tp, rs in c.poll(0.3).items():
                got += [r.value for r in rs]
                if rs and rs[-1].offset + 1 >= ends[tp]:
                    left.discard(tp)
    assert not left, f"{sorted(left)} not read to their end offsets {ends} in {timeout} s"
    assert len(got) == sum(ends.values()), f"{len(got)} records read, end offsets {ends}"
    return got


@pytest.mark.peers
@pytest.mark.slow   # two broker processes and a crash: ~6 s
def test_sigkill_while_producing_loses_no_acknowledged_record(tmp_path):
    import confluent_kafka as ck
    import confluent_kafka.admin  # noqa: F401 - ck.admin

    proc, bs = start(tmp_path)
    acked: list[bytes] = []
    try:
        admin = ck.admin.AdminClient({"bootstrap.servers": bs})
        for f in admin.create_topics([ck.admin.NewTopic("crash", 2, 1)]).values():
            f.result(10)
        p = ck.Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 1, "compression.type": "lz4", "message.timeout.ms": 3000})
        lock = threading.Lock()

        def cb(err, msg):
            if err is None:
                with lock:
                    acked.append(msg.value())
        i = 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.5:
            try:
                p.produce("crash", b"r%07d" % i, on_delivery=cb)
            except BufferError:               # the client's queue is full: wait for acks,
                p.poll(0.05)                  # as a real producer under backpressure does
                continue
            p.poll(0)
            i += 1
            if i % 500 == 0:
                time.sleep(0.001)
        os.kill(proc.pid, signal.SIGKILL)     # mid-stream, no flush, no clean shutdown
        proc.wait(10)
        p.flush(5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert len(acked) > 100
    # tear the tail of one segment, as a crash in the middle of a write would
    seg = sorted(glob.glob(str(tmp_path / "logs" / "crash-0" / "*.log")))[-1]
    with open(seg, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x10\x00\x00\x00\x01\x00\xff\xff")
    size_torn = os.path.getsize(seg)
    proc, bs = start(tmp_path)
    try:
        got = consume_all(bs, "crash", 2)
        assert set(acked) <= set(got), f"{len(set(acked) - set(got))} acknowledged records lost"
        assert len(got) == len(set(got))
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
    assert os.path.getsize(seg) < size_torn    # the torn tail was cut
    for path in glob.glob(str(tmp_path / "logs" / "crash-*" / "*.log")):
        with open(path, "rb") as f:
            data = f.read()
        it = iter_batches(data)            # validates every CRC
        n = sum(1 for _ in it)
        assert it.consumed == len(data) and n >= 0
    assert os.path.exists(tmp_path / "logs" / ".kafka_cleanshutdown")


def test_cli_prints_bootstrap_and_stops_cleanly_on_ctrl_c(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "kcodec", "broker", "--nodes", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        addrs = line.split(",")
        assert len(addrs) == 2 and all(a.startswith("127.0.0.1:") for a in addrs)
        from kcodec.client import Admin
        with Admin(bootstrap_servers=line) as admin:
            assert len(admin.describe_cluster().brokers) == 2
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
    assert "stopped" in proc.stderr.read()


def test_cli_stops_on_sigint_even_when_started_with_sigint_ignored():
    """A script's background job inherits SIGINT ignored (`kcodec broker &` in a script);
    `kill -INT` must still stop it cleanly, as Ctrl-C does at a terminal."""
    proc = subprocess.Popen([sys.executable, "-m", "kcodec", "broker"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert proc.stdout.readline().strip().startswith("127.0.0.1:")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "stopped" in proc.stderr.read()


def test_cli_rejects_bad_arguments():
    r = subprocess.run([sys.executable, "-m", "kcodec", "broker", "--nodes", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--nodes" in r.stderr
