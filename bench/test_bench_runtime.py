"""``kcodec run`` against FastStream and Quix Streams, side by side in one run.

Workload (E in ../shared/reference/workloads.md): one local broker, a 4-partition topic,
1,000,000 records of a 16-byte key and a 100-byte value, consumed from the beginning by a
new group into a no-op handler that counts (bench.runtime_handlers). Each contender is a
process (or the runtime's processes) of its own; the clock runs from the first record a
handler saw to the moment the count reached the total, so start-up and group joins are
left out for all alike. Rounds are interleaved; medians are reported, with ratios.

    python -m venv /tmp/peers && /tmp/peers/bin/pip install quixstreams 'faststream[kafka]'
    KCODEC_BENCH_QUIX_PYTHON=/tmp/peers/bin/python \
        .venv/bin/python -m pytest bench/test_bench_runtime.py -s -p no:cacheprovider

The peers run on that venv's python (Quix Streams pins confluent-kafka below the tests'
need); FastStream too when it is there, else on the project's own (the ``bench`` extra).
    KCODEC_BENCH_ROUNDS=3 KCODEC_BENCH_RECORDS=1000000 ...
    KCODEC_BENCH_ONLY="direct,file,redis,Quix,batch" ...   # those contenders only

Rows (``test_runtime_against_faststream_and_quixstreams``):
* kcodec run direct, 1 puller (the handler in the puller), the no-op handler;
* kcodec run file (--fsync always, the default, and interval) and redis, 1 puller + 1
  sinker, and the store's cost per record over direct;
* FastStream (aiokafka underneath), one message a call and ``batch=True``;
* Quix Streams (confluent-kafka underneath).

On kcodec's broker first; where a peer cannot run there (Quix Streams could not before
the broker ignored the three stray bytes of librdkafka 2.12's Metadata v12, as Kafka does)
the comparison is repeated on Tansu, with the same data, and both tables are printed.

How pullers scale over cores (``test_pullers_scale_over_cores``: 1 and 2 pullers, with the
no-op, a busy and a waiting handler) is measured apart, each run once its group has
settled: there the records wait in an open transaction until every puller holds its
partitions (``_measure_held`` says why).
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
from typing import Any

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


def _rows(d: str) -> list[tuple[float, int, float]]:
    """The handler processes' count files in ``d``: (first record's time, count, last's)."""
    rows = []
    for f in os.listdir(d):
        if f.startswith("."):
            continue
        try:
            a, n, t = open(os.path.join(d, f)).read().split()
        except (ValueError, OSError):
            continue
        rows.append((float(a), int(n), float(t)))
    return rows


def _stop(p: subprocess.Popen) -> None:
    """SIGTERM (the runtime's clean stop), then SIGKILL after 30 s."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


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
            rows = _rows(d)
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
        _stop(p)
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
    if kind == "quixstreams" or not _has("faststream", sys.executable):
        python = os.environ.get("KCODEC_BENCH_QUIX_PYTHON", sys.executable)

    def argv(boot: str, topic: str) -> list[str]:
        return [python, "-m", "bench.runtime_peers", kind, boot, topic,
                f"g-{uuid.uuid4().hex[:8]}"]
    return argv


def _has(module: str, python: str) -> bool:
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True,
                          timeout=120).returncode == 0


def _has_quix() -> bool:
    return _has("quixstreams", os.environ.get("KCODEC_BENCH_QUIX_PYTHON", sys.executable))


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


# the goals, as multiples of each peer: the stores at 2x, direct at 4x
GOALS = {"kcodec run direct, 1 puller": 4.0, "kcodec run file, 1+1": 2.0,
         "kcodec run redis, 1+1": 2.0}
PEERS = ("Quix Streams", "FastStream (batch=True)")


def _table(title: str, results: dict[str, list[float | None]], notes: dict[str, str]) -> None:
    med = {k: statistics.median([x for x in v if x]) if any(v) else None
           for k, v in results.items()}
    peers = [med[k] for k in med if not k.startswith("kcodec") and med[k]]
    best = max(peers) if peers else None
    vs = [p for p in PEERS if med.get(p)]
    direct = med.get("kcodec run direct, 1 puller")
    print(f"\n{title}: {N:,} records, rounds {ROUNDS}, load {os.getloadavg()[0]:.1f}")
    heads = "".join(f" {'x ' + p.split(' (')[0].split()[0]:>11}" for p in vs)
    print(f"{'contender':44} {'records/s':>11} {'vs best peer':>13}{heads}  rounds")
    for k, v in med.items():
        ratio = f"{v / best:.2f}x" if v and best else "-"
        each = "".join(f" {f'{v / med[p]:.2f}x' if v else '-':>11}" for p in vs)
        rounds = " ".join(f"{x:,.0f}" if x else "fail" for x in results[k])
        print(f"{k:44} {v or 0:>11,.0f} {ratio:>13}{each}  {rounds}"
              + (f"  ({notes[k]})" if k in notes else ""))
    for k in ("kcodec run file, 1+1", "kcodec run file --fsync interval, 1+1",
              "kcodec run redis, 1+1"):
        if med.get(k) and direct:
            print(f"{k}: the store costs {1e6 / med[k] - 1e6 / direct:.1f} us a record over direct")
    for k, goal in GOALS.items():
        if k not in med:
            continue
        got = [(p, med[k] / med[p]) for p in vs if med[k]]
        held = bool(got) and all(r >= goal for _p, r in got)
        print(f"goal {goal:g}x each peer, {k}: " + ("met" if held else "NOT met") + " (" +
              ", ".join(f"{r:.2f}x {p}" for p, r in got) + ")")


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
    if not (_has("faststream", sys.executable) or _has(
            "faststream", os.environ.get("KCODEC_BENCH_QUIX_PYTHON", sys.executable))):
        pytest.skip("FastStream is not installed: pip install 'faststream[kafka]' here or "
                    "into the venv of KCODEC_BENCH_QUIX_PYTHON")
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
        "kcodec run file, 1+1": _kcodec("file", 1, 1),
        "kcodec run file --fsync interval, 1+1": _kcodec("file", 1, 1, "", "noop", "--fsync",
                                                         "interval"),
        "FastStream (batch=True)": _peer("faststream-batch"),
        "FastStream (one message a call)": _peer("faststream"),
        "Quix Streams": _peer("quixstreams"),
    }
    if redis_url:
        contenders["kcodec run redis, 1+1"] = _kcodec("redis", 1, 1, redis_url)
    else:
        print("\nno redis-server on PATH: the Redis store's row is left out (apt install "
              "redis-server, or KCODEC_INSTALL_SYSTEM_PACKAGES=1 scripts/test)")
    only = [w.strip() for w in os.environ.get("KCODEC_BENCH_ONLY", "").split(",") if w.strip()]
    if only:    # a quicker look: the contenders whose names hold one of these words
        contenders = {k: v for k, v in contenders.items() if any(w in k for w in only)}
    broker = _Server([sys.executable, "-m", "kcodec", "broker", "--port", str(free_port()),
                      "--partitions", "4"])
    try:
        topic = f"bench-{uuid.uuid4().hex[:6]}"
        _prepare(broker.line, topic)
        results, notes = _round_robin(broker.line, topic, contenders)
        _table("kcodec broker", results, notes)
    finally:
        broker.stop()
    if any(v is None for v in results.get("Quix Streams", [])):
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


def _prepare_held(boot: str, topic: str) -> Any:
    """The workload's records in one open transaction: on the log, invisible to a
    read_committed consumer until the returned producer commits it."""
    from kcodec.client import Admin, Producer

    with Admin(bootstrap_servers=boot) as a:
        a.create_topics([topic], num_partitions=4)
    p = Producer(bootstrap_servers=boot, linger_ms=20, batch_size=256 * 1024,
                 transactional_id=f"bench-{uuid.uuid4().hex[:8]}",
                 transaction_timeout_ms=300_000)
    p.init_transactions(60)
    p.begin_transaction()
    value = b"v" * 100
    for i in range(N):
        p.send(topic, value, key=b"%016d" % i)
    p.flush(300)
    return p


def _settled(boot: str, group: str, members: int, timeout: float = 60.0) -> float:
    """Seconds until ``group`` has ``members`` members that own the topic's 4 partitions
    between them, each at least one (the assignment a run ends up with)."""
    from kcodec.client import Admin

    t0 = time.monotonic()
    with Admin(bootstrap_servers=boot) as a:
        while time.monotonic() - t0 < timeout:
            d = a.describe_groups([group])[0]
            owned = [sum(len(ps) for ps in m.assignment.values()) for m in d.members]
            if len(owned) == members and sum(owned) == 4 and min(owned) > 0:
                return time.monotonic() - t0
            time.sleep(0.1)
    raise AssertionError(f"group {group!r} did not settle on {members} members in {timeout} s")


def _measure_held(boot: str, pullers: int, handler: str
                  ) -> tuple[float | None, float, tuple[float, float]]:
    """records/s of ``kcodec run direct`` with ``pullers`` pullers once every puller holds
    its partitions: the records are on a fresh topic in an open transaction, the runtime
    reads committed records only, and the transaction commits when the group has settled.
    The clock starts at the first record handled, as in ``_measure``; the settling time
    (joins and the rebalance that gives the later pullers their share) is returned apart,
    and so is how far apart the pullers' first records and their last ones were (s)."""
    topic, group = f"bench-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:8]}"
    producer = _prepare_held(boot, topic)
    d = tempfile.mkdtemp(prefix="kcodec-bench-count-")
    argv = [sys.executable, "-m", "kcodec", "run", f"bench.runtime_handlers:{handler}",
            "-t", topic, "-g", group, "-b", boot, "--storage", "direct",
            "--pullers", str(pullers), "--sinkers", "0", "--log-level", "WARNING",
            "-X", "isolation_level=read_committed",
            "--state-dir", tempfile.mkdtemp(prefix="kcodec-bench-run-")]
    proc = subprocess.Popen(argv, env=env(KCODEC_BENCH_COUNT_DIR=d, KCODEC_BENCH_TOTAL=str(N)),
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rate, skew = None, (0.0, 0.0)
    try:
        settle = _settled(boot, group, pullers)
        assert not os.listdir(d), "records were handled before the transaction committed"
        producer.commit_transaction(60)
        deadline = time.monotonic() + STALL
        while time.monotonic() < deadline and proc.poll() is None:
            rows = _rows(d)
            if sum(r[1] for r in rows) >= N:
                assert len(rows) == pullers, f"{len(rows)} of {pullers} pullers handled records"
                rate = N / (max(r[2] for r in rows) - min(r[0] for r in rows))
                skew = (max(r[0] for r in rows) - min(r[0] for r in rows),
                        max(r[2] for r in rows) - min(r[2] for r in rows))
                break
            time.sleep(0.02)
    finally:
        producer.close(10)
        _stop(proc)
        shutil.rmtree(d, ignore_errors=True)
    return rate, settle, skew


def test_pullers_scale_over_cores() -> None:
    """Direct mode, 1 and 2 pullers, with the no-op handler, the busy one (~10 us of Python
    a record) and the waiting one (20 ms a batch, no CPU): only kcodec, on kcodec's broker,
    the ratios printed side by side.

    Both pullers must be working for the whole run to measure how they scale: with the
    records already there, the first puller to join owns every partition and a run of 1M
    records (under 2 s) ends before the rebalance that gives the second its share (the
    consumer protocol's reconciliation takes a heartbeat interval or two). So each run's
    records wait in an open transaction, read_committed, until the group has settled (see
    ``_measure_held``); a second puller that handled nothing fails the run."""
    from kcodec.testing.net import free_port

    rows = [(h, n) for h in ("noop", "busy", "waiting") for n in (1, 2)]
    results: dict[str, list[float | None]] = {f"{h}, {n} puller{'s' * (n > 1)}": []
                                              for h, n in rows}
    settles: list[float] = []
    skews: dict[str, list[tuple[float, float]]] = {k: [] for k in results}
    broker = _Server([sys.executable, "-m", "kcodec", "broker", "--port", str(free_port()),
                      "--partitions", "4"])
    try:
        for _ in range(ROUNDS):
            for h, n in rows:
                rate, settle, skew = _measure_held(broker.line, n, h)
                results[f"{h}, {n} puller{'s' * (n > 1)}"].append(rate)
                skews[f"{h}, {n} puller{'s' * (n > 1)}"].append(skew)
                settles.append(settle)
    finally:
        broker.stop()
    med = {k: statistics.median([x for x in v if x]) if any(v) else None
           for k, v in results.items()}
    print(f"\nkcodec run direct on kcodec's broker: {N:,} records, 4 partitions, rounds "
          f"{ROUNDS}, load {os.getloadavg()[0]:.1f}, group settled in "
          f"{min(settles):.1f}-{max(settles):.1f} s (not timed)")
    for k, v in med.items():
        rounds = " ".join(f"{x:,.0f}" if x else "fail" for x in results[k])
        apart = "" if k.endswith(" 1 puller") else "  first/last records apart (s): " + \
            " ".join(f"{a:.2f}/{b:.2f}" for a, b in skews[k])
        print(f"{k:24} {v or 0:>11,.0f}  {rounds}{apart}")
    for h in ("noop", "busy", "waiting"):
        one, two = med[f"{h}, 1 puller"], med[f"{h}, 2 pullers"]
        if one and two:
            print(f"two pullers / one, {h} handler: {two / one:.2f}x")
    assert all(med.values()), "a contender did not finish"
