"""``kcodec run`` against FastStream and Quix Streams, side by side in one run.

Workload (E in ../shared/reference/workloads.md): one local broker, a 4-partition topic,
1,000,000 records of a 16-byte key and a 100-byte value, consumed from the beginning by a
new group into a no-op handler that counts (bench.runtime_handlers). Each contender is a
process (or the runtime's processes) of its own; the clock runs from the first record a
handler saw to the moment the count reached the total, so start-up and group joins are
left out for all alike. Rounds are interleaved; medians are reported, with ratios.

    python -m venv /tmp/quix && /tmp/quix/bin/pip install quixstreams
    KCODEC_BENCH_QUIX_PYTHON=/tmp/quix/bin/python \
        .venv/bin/python -m pytest bench/test_bench_runtime.py -s -p no:cacheprovider
    KCODEC_BENCH_ROUNDS=3 KCODEC_BENCH_RECORDS=1000000 ...

Rows:
* kcodec run direct, 1 puller and 2 pullers (the handler in the puller), with the no-op
  handler and with a busy one (about 10 us of Python a record: the handler, not the
  broker, bounds the rate, so the rows show how pullers scale over cores);
* kcodec run file (--fsync always, the default, and interval) and redis, 1 puller + 1
  sinker, and the store's cost per record over direct;
* FastStream (aiokafka underneath), one message a call and ``batch=True``;
* Quix Streams (confluent-kafka underneath).
On kcodec's broker first; where a peer cannot run there (Quix Streams could not before
the broker ignored the three stray bytes of librdkafka 2.12's Metadata v12, as Kafka does)
the comparison is repeated on Tansu, with the same data, and both tables are printed.
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

from tests.runtime.support import ROOT, env

N = int(os.environ.get("KCODEC_BENCH_RECORDS", "1000000"))
ROUNDS = int(os.environ.get("KCODEC_BENCH_ROUNDS", "2"))
STALL = 60.0    # a contender that counts nothing new for this long has stopped


def _prepare(boot: str, topic: str) -> None:
    from kcodec.client import Admin, Producer

    with Admin(bootstrap_servers=boot) as a:
        a.create_topics([topic], num_partitions=4)
    value = b"v" * 100
    with Producer(bootstrap_servers=boot, linger_ms=20, batch_size=256 * 1024) as p:
        for i in range(N):
            p.send(topic, value, key=b"%016d" % i)
        p.flush(300)


def _measure(argv: list[str], extra_env: dict[str, str]) -> tuple[float | None, str]:
    """records/s of one contender (None: it did not get through), and its stderr tail."""
    d = tempfile.mkdtemp(prefix="kcodec-bench-count-")
    err = tempfile.TemporaryFile()
    e = env(KCODEC_BENCH_COUNT_DIR=d, KCODEC_BENCH_TOTAL=str(N), **extra_env)
    p = subprocess.Popen(argv, env=e, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
    rate = None
    try:
        last, still = -1, time.monotonic()
        while p.poll() is None:
            rows = []
            for f in os.listdir(d):
                if f.startswith("."):
                    continue
                try:
                    a, n, t = open(os.path.join(d, f)).read().split()
                except (ValueError, OSError):
                    continue
                rows.append((float(a), int(n), float(t)))
            total = sum(r[1] for r in rows)
            if total >= N:
                rate = N / (max(r[2] for r in rows) - min(r[0] for r in rows))
                break
            if total != last:
                last, still = total, time.monotonic()
            elif time.monotonic() - still > STALL:
                break
            time.sleep(0.02)
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
        shutil.rmtree(d, ignore_errors=True)
        err.seek(0)
        tail = err.read().decode(errors="replace")[-1500:]
        err.close()
    return rate, tail


def _kcodec(storage: str, pullers: int, sinkers: int, redis_url: str = "", handler: str = "noop",
            *extra: str):
    def argv(boot: str, topic: str) -> list[str]:
        a = [sys.executable, "-m", "kcodec", "run", f"bench.runtime_handlers:{handler}", "-t", topic,
             "-g", f"g-{uuid.uuid4().hex[:8]}", "-b", boot, "--storage", storage,
             "--pullers", str(pullers), "--sinkers", str(sinkers), "--log-level", "WARNING",
             "--state-dir", tempfile.mkdtemp(prefix="kcodec-bench-run-")]
        if redis_url:
            a += ["--redis-url", redis_url, "--redis-prefix", f"bench:{uuid.uuid4().hex[:8]}"]
        return a + list(extra)
    return argv


def _peer(kind: str):
    python = sys.executable
    if kind == "quixstreams":   # its own venv: it pins confluent-kafka below the tests' need
        python = os.environ.get("KCODEC_BENCH_QUIX_PYTHON", sys.executable)

    def argv(boot: str, topic: str) -> list[str]:
        return [python, "-m", "bench.runtime_peers", kind, boot, topic,
                f"g-{uuid.uuid4().hex[:8]}"]
    return argv


def _has_quix() -> bool:
    python = os.environ.get("KCODEC_BENCH_QUIX_PYTHON", sys.executable)
    return subprocess.run([python, "-c", "import quixstreams"], capture_output=True,
                          timeout=120).returncode == 0


class _Server:
    def __init__(self, argv: list[str], ready: str | None = None) -> None:
        self.proc = subprocess.Popen(argv, env=env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        assert self.proc.stdout is not None
        self.line = self.proc.stdout.readline().decode().strip()

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _table(title: str, results: dict[str, list[float | None]], notes: dict[str, str]) -> None:
    med = {k: statistics.median([x for x in v if x]) if any(v) else None
           for k, v in results.items()}
    peers = [med[k] for k in med if not k.startswith("kcodec") and med[k]]
    best = max(peers) if peers else None
    direct = med.get("kcodec run direct, 1 puller")
    print(f"\n{title}: {N:,} records, rounds {ROUNDS}, load {os.getloadavg()[0]:.1f}")
    print(f"{'contender':44} {'records/s':>11} {'vs best peer':>13}  rounds")
    for k, v in med.items():
        ratio = f"{v / best:.2f}x" if v and best else "-"
        rounds = " ".join(f"{x:,.0f}" if x else "fail" for x in results[k])
        print(f"{k:44} {v or 0:>11,.0f} {ratio:>13}  {rounds}" + (f"  ({notes[k]})" if k in notes else ""))
    two = med.get("kcodec run direct, 2 pullers")
    if two and direct:
        print(f"two pullers / one: {two / direct:.2f}x (no-op handler)")
    b1, b2 = (med.get("kcodec run direct, 1 puller, busy handler"),
              med.get("kcodec run direct, 2 pullers, busy handler"))
    if b1 and b2:
        print(f"two pullers / one: {b2 / b1:.2f}x (busy handler, ~10 us of Python a record)")
    for k in ("kcodec run file, 1+1", "kcodec run file --fsync interval, 1+1",
              "kcodec run redis, 1+1"):
        if med.get(k) and direct:
            print(f"{k}: the store costs {1e6 / med[k] - 1e6 / direct:.1f} us a record over direct")


def _round_robin(boot: str, topic: str, contenders: dict) -> tuple[dict, dict]:
    results: dict[str, list[float | None]] = {k: [] for k in contenders}
    notes: dict[str, str] = {}
    for _ in range(ROUNDS):
        for name, argv in contenders.items():
            rate, tail = _measure(argv(boot, topic), {})
            results[name].append(rate)
            if rate is None:
                notes[name] = "did not finish: " + " | ".join(
                    ln for ln in tail.splitlines()[-2:] if ln.strip())[:160]
    return results, notes


def test_runtime_against_faststream_and_quixstreams() -> None:
    pytest.importorskip("faststream")
    if not _has_quix():
        pytest.skip("Quix Streams is not installed: pip install quixstreams into a venv of its "
                    "own and set KCODEC_BENCH_QUIX_PYTHON to its python (it pins "
                    "confluent-kafka < 2.13)")
    from kcodec.testing.net import free_port

    redis_url = ""
    redis_proc = None
    if shutil.which("redis-server"):
        rport = free_port()
        rdir = tempfile.mkdtemp(prefix="kcodec-bench-redis-")
        redis_proc = subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1",
                                       "--dir", rdir, "--appendonly", "yes", "--save", ""],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        redis_url = f"redis://127.0.0.1:{rport}/0"
        time.sleep(0.5)
    contenders = {
        "kcodec run direct, 1 puller": _kcodec("direct", 1, 0),
        "kcodec run direct, 2 pullers": _kcodec("direct", 2, 0),
        "kcodec run direct, 1 puller, busy handler": _kcodec("direct", 1, 0, handler="busy"),
        "kcodec run direct, 2 pullers, busy handler": _kcodec("direct", 2, 0, handler="busy"),
        "kcodec run file, 1+1": _kcodec("file", 1, 1),
        "kcodec run file --fsync interval, 1+1": _kcodec("file", 1, 1, "", "noop", "--fsync",
                                                         "interval"),
        "FastStream (batch=True)": _peer("faststream-batch"),
        "FastStream (one message a call)": _peer("faststream"),
        "Quix Streams": _peer("quixstreams"),
    }
    if redis_url:
        contenders["kcodec run redis, 1+1"] = _kcodec("redis", 1, 1, redis_url)
    broker = _Server([sys.executable, "-m", "kcodec", "broker", "--port", str(free_port()),
                      "--partitions", "4"])
    try:
        topic = f"bench-{uuid.uuid4().hex[:6]}"
        _prepare(broker.line, topic)
        results, notes = _round_robin(broker.line, topic, contenders)
        _table("kcodec broker", results, notes)
    finally:
        broker.stop()
    if any(v is None for v in results["Quix Streams"]):
        from kcodec.testing.tansu import Tansu

        with Tansu() as t:
            topic = f"bench-{uuid.uuid4().hex[:6]}"
            _prepare(t.bootstrap, topic)
            again = {k: contenders[k] for k in ("kcodec run direct, 1 puller",
                                                "FastStream (batch=True)", "Quix Streams")}
            results, notes = _round_robin(t.bootstrap, topic, again)
            _table("Tansu (same data; Quix Streams could not run on kcodec's broker)",
                   results, notes)
    if redis_proc is not None:
        redis_proc.kill()


def test_pullers_scale_with_a_handler_that_waits() -> None:
    """Direct mode, 1 and 2 pullers, the no-op handler and one that waits 20 ms a batch
    (I/O, no CPU): only kcodec, on kcodec's broker, ratios printed side by side."""
    from kcodec.testing.net import free_port

    contenders = {
        "kcodec run direct, 1 puller": _kcodec("direct", 1, 0),
        "kcodec run direct, 2 pullers": _kcodec("direct", 2, 0),
        "kcodec run direct, 1 puller, waiting handler": _kcodec("direct", 1, 0, handler="waiting"),
        "kcodec run direct, 2 pullers, waiting handler": _kcodec("direct", 2, 0,
                                                                 handler="waiting"),
    }
    broker = _Server([sys.executable, "-m", "kcodec", "broker", "--port", str(free_port()),
                      "--partitions", "4"])
    try:
        topic = f"bench-{uuid.uuid4().hex[:6]}"
        _prepare(broker.line, topic)
        results, notes = _round_robin(broker.line, topic, contenders)
        _table("kcodec broker, pullers", results, notes)
        med = {k: statistics.median([x for x in v if x]) for k, v in results.items() if any(v)}
        w1 = med.get("kcodec run direct, 1 puller, waiting handler")
        w2 = med.get("kcodec run direct, 2 pullers, waiting handler")
        if w1 and w2:
            print(f"two pullers / one: {w2 / w1:.2f}x (waiting handler, 20 ms a batch)")
    finally:
        broker.stop()
