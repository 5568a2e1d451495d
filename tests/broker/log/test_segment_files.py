"""Segment files are opened through a bounded cache: many partitions on disk under a low
descriptor limit are written, read, closed and recovered correctly, the descriptors open
stay under the bound, and the broker keeps accepting connections."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from kcodec.broker.log.files import FileCache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def test_the_cache_closes_the_least_recently_used(tmp_path):
    cache = FileCache(3)
    paths = [str(tmp_path / f"f{i}") for i in range(5)]
    fds = []
    for p in paths:
        fds.append(cache.acquire("o", p, os.O_RDWR | os.O_CREAT))
        cache.release("o", p)
    assert len(cache) == 3 and cache.evicted == 2 and cache.opened == 5
    # the first two were closed; using the third again keeps it over the fourth
    fd = cache.acquire("o", paths[2], os.O_RDWR)
    cache.release("o", paths[2])
    assert fd == fds[2]
    cache.acquire("o", paths[0], os.O_RDWR)
    cache.release("o", paths[0])
    assert set(k[1] for k in cache._open) == {paths[2], paths[4], paths[0]}
    for p in paths:
        cache.forget("o", p)
    assert len(cache) == 0


def test_a_descriptor_in_use_is_not_closed(tmp_path):
    cache = FileCache(1)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    fa = cache.acquire("o", a, os.O_RDWR | os.O_CREAT)         # pinned
    fb = cache.acquire("o", b, os.O_RDWR | os.O_CREAT)
    os.write(fa, b"still open")                                 # not closed under its user
    assert len(cache) == 2
    cache.release("o", b)
    cache.forget("o", a)                                        # in use: closed on release
    os.write(fa, b"!")
    cache.release("o", a)
    assert len(cache) == 1
    cache.forget("o", b)
    assert fa != fb and len(cache) == 0
    assert open(a, "rb").read() == b"still open!"


_LOGS = textwrap.dedent("""
    import os, resource, sys
    resource.setrlimit(resource.RLIMIT_NOFILE, (@LIMIT@, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    from kcodec.broker.log import LogConfig, LogManager
    from kcodec.broker.log.files import SEGMENT_FILES
    from kcodec.records import RecordBatchBuilder

    def batch(i):
        b = RecordBatchBuilder()
        b.append(b"k%d" % i, b"v%d" % i * 20, [], 1_700_000_000_000 + i)
        return b.build()

    def fds():
        return len(os.listdir("/proc/self/fd"))

    one = len(batch(0))
    cfg = LogConfig(segment_bytes=one * 3, index_interval_bytes=one, retention_ms=-1)
    most = 0
    data = sys.argv[1]
    with LogManager(data) as mgr:
        logs = [mgr.create("t", p, cfg) for p in range(@PARTITIONS@)]
        for round in range(7):                  # 7 batches: 3 segments or more a partition
            for p, log in enumerate(logs):
                log.append(batch(p * 10 + round), now_ms=1_700_000_000_000)
            most = max(most, fds())
        mgr.flush()
        for p, log in enumerate(logs):
            assert len(log.segments) >= 3, len(log.segments)
            for round in range(7):
                got = log.read(round, 1, min_one=True)
                want = batch(p * 10 + round)
                assert len(got) == len(want) and got[61:] == want[61:], (p, round)
            most = max(most, fds())
    with LogManager(data) as mgr:               # recovery of every partition, then reads
        mgr.open()
        for p in range(@PARTITIONS@):
            log = mgr.get("t", p)
            assert log.log_end_offset == 7, (p, log.log_end_offset)
            assert b"v%d" % (p * 10 + 6) in log.read(6, 1 << 20)
            most = max(most, fds())
    print("most", most, "capacity", SEGMENT_FILES.capacity, "evicted", SEGMENT_FILES.evicted)
    assert most < @LIMIT@
""")


def test_many_partitions_under_a_low_descriptor_limit(tmp_path):
    # 150 partitions of 3 segments or more: over 1,350 segment files, 128 descriptors allowed
    script = _LOGS.replace("@LIMIT@", "128").replace("@PARTITIONS@", "150")
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    words = out.stdout.split()
    most, capacity, evicted = int(words[1]), int(words[3]), int(words[5])
    assert capacity == 32 and evicted > 1000
    assert most < 128


_BROKER = textwrap.dedent("""
    import os, resource, socket, sys
    resource.setrlimit(resource.RLIMIT_NOFILE, (@LIMIT@, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    from kcodec.broker import Cluster
    from kcodec.client import Admin, Consumer, Producer, TopicPartition
    from kcodec.client.admin import NewTopic

    with Cluster(1, data_dir=sys.argv[1]) as c:
        with Admin(bootstrap_servers=c.bootstrap) as admin:
            err = admin.create_topics([NewTopic("wide", @PARTITIONS@)])["wide"]
            assert err is None, err
        with Producer(bootstrap_servers=c.bootstrap, linger_ms=5) as p:
            for i in range(@PARTITIONS@):
                p.send("wide", b"v%d" % i, partition=i)
            p.flush()
        parts = c.state.topics["wide"].partitions
        assert all(parts[i].log.log_end_offset == 1 for i in range(@PARTITIONS@))
        some = range(0, @PARTITIONS@, 97)
        with Consumer(bootstrap_servers=c.bootstrap, auto_offset_reset="earliest") as cons:
            cons.assign([TopicPartition("wide", i) for i in some])
            got = set()
            for _ in range(100):
                for records in cons.poll(0.5).values():
                    got.update(r.value for r in records)
                if len(got) == len(some):
                    break
            assert got == {b"v%d" % i for i in some}, got
        # connections are still accepted and answered
        for _ in range(10):
            with Admin(bootstrap_servers=c.bootstrap) as admin:
                assert admin.describe_cluster().brokers
        print("fds", len(os.listdir("/proc/self/fd")))
""")


@pytest.mark.slow
def test_the_broker_creates_and_serves_more_partitions_than_descriptors(tmp_path):
    # 3 files a partition: 1,000 partitions would need 3,000 descriptors with eager opens
    script = _BROKER.replace("@LIMIT@", "1024").replace("@PARTITIONS@", "1000")
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(out.stdout.split()[-1]) < 1024
