"""``kcodec run`` end to end: the command in a process of its own against ``kcodec broker``
(another process), each storage mode, ``kcodec ctl``, retries and the dead-letter topic, bad
handlers, the memory limit, and signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from itertools import pairwise

import pytest

from kcodec.client import Admin, Consumer, TopicPartition
from tests.runtime.support import ROOT, Run, env, produce, read_log, wait_for
from tests.support import REPO as ROOT_PATH
from tests.support import project_text


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def store_args(storage: str, request) -> list[str]:
    """``--storage`` and, for redis, a real redis-server's URL under a prefix of its own."""
    args = ["--storage", storage]
    if storage == "redis":
        args += ["--redis-url", request.getfixturevalue("redis_server").url,
                 "--redis-prefix", name("p")]
    return args


def all_offsets(n: int, topic: str, partitions: int = 4) -> set:
    """(topic, partition, offset) of n records produced with keys 0..n-1."""
    from kcodec.client.producer.partitioner import partition_for_key  # the producer's own choice

    per = [0] * partitions
    out = set()
    for i in range(n):
        p = partition_for_key(b"%d" % i, partitions)
        out.add((topic, p, per[p]))
        per[p] += 1
    return out


def committed(bootstrap: str, group: str) -> dict:
    with Admin(bootstrap_servers=bootstrap) as a:
        return a.committed_offsets(group)


@pytest.fixture
def run_factory():
    made: list[Run] = []

    def make(*a, **kw) -> Run:
        r = Run(*a, **kw)
        made.append(r)
        return r
    yield make
    for r in made:
        if r.proc is not None and r.proc.poll() is None:
            r.kill_all()


@pytest.mark.parametrize("storage", ["file", "direct", "redis"])
def test_every_record_handled_and_ctl_answers(kbroker, run_factory, storage, request) -> None:
    topic, group = name("t"), name("g")
    produce(kbroker.bootstrap, topic, 300)
    args = store_args(storage, request) + ["--pullers", "2", "--sinkers", "2"]
    # redis runs the classic protocol (a leader member assigns); the others the default,
    # the consumer protocol (the broker assigns, no member leads)
    protocol = "classic" if storage == "redis" else "consumer"
    r = run_factory(kbroker.bootstrap, topic, group, *args,
                    extra_env={"KCODEC_RUN_CLIENT_GROUP_PROTOCOL": protocol})
    want = all_offsets(300, topic)
    wait_for(lambda: set(r.handled()) >= want, 60, "every record handled", r.stderr)
    assert set(r.handled()) == want

    st = r.ctl("status")
    assert st["storage"] == storage and st["group"] == group
    roles = sorted(p["role"] for p in st["processes"])
    assert roles == (["puller"] * 2 if storage == "direct" else ["puller"] * 2 + ["sinker"] * 2)
    assert all(p["pid"] and p["rss"] > 0 and p["restarts"] == 0 for p in st["processes"])
    assert sum(p["done"] for p in st["processes"]) >= 300
    # each process is named for its role in ps/top, not multiprocessing's spawn
    for p in st["processes"]:
        with open(f"/proc/{p['pid']}/comm") as f:
            assert f.read().strip() == f"kcodec-{p['role']}-{p['slot']}"
        # and its whole title is its command line (ps -o args, top -c)
        with open(f"/proc/{p['pid']}/cmdline", "rb") as f:
            shown = f.read().rstrip(b"\0").decode()
        assert shown == f"kcodec run: {p['role']} {p['slot']} (group {group})", shown
    # the master's too: its own command line (with --redis-url) is no longer what ps shows
    assert r.proc is not None
    with open(f"/proc/{r.proc.pid}/cmdline", "rb") as f:
        assert f.read().rstrip(b"\0").decode() == f"kcodec run: master (group {group})"

    def caught_up() -> bool:
        rows = r.ctl("offsets")
        return len(rows) == 4 and all(x["committed"] == x["end"] for x in rows)
    wait_for(caught_up, 30, "offsets committed to the end", lambda: r.ctl("offsets"))
    lag = r.ctl("lag")
    assert lag["total"] == 0 and len(lag["partitions"]) == 4
    def settled() -> bool:   # both pullers joined, the group stable
        m = r.ctl("members")
        return m["state"] == "Stable" and len(m["members"]) == 2 and \
            all(x["ours"] and x["assignment"] for x in m["members"])
    wait_for(settled, 30, "a stable group of two", lambda: r.ctl("members"))
    members = r.ctl("members")
    assert sorted(p for m in members["members"] for p in m["assignment"][topic]) == [0, 1, 2, 3]
    leader = r.ctl("leader")
    assert leader["protocol"] == protocol
    if protocol == "classic":
        assert sum(m["leader"] for m in members["members"]) == 1
        assert leader["ours"] and leader["leader"] in {m["member_id"] for m in members["members"]}
    else:
        assert not any(m["leader"] for m in members["members"])
        assert leader["leader"] is None and "no leader member" in leader["source"]
    assert r.ctl("metadata", what="brokers")[0]["port"] == kbroker.port
    assert [t["name"] for t in r.ctl("metadata", what="topics")] == [topic]
    assert r.ctl("backlog") == {"storage": storage, "pending": 0, "delayed": 0,
                                "processing": 0, "failed": 0}
    # the command itself: a table for people, JSON for machines
    out = subprocess.run([sys.executable, "-m", "kcodec", "ctl", "status", "--state-dir",
                          r.state_dir], env=env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "ROLE" in out.stdout and "puller" in out.stdout, out.stderr
    out = subprocess.run([sys.executable, "-m", "kcodec", "ctl", "--json", "backlog",
                          "--state-dir", r.state_dir], env=env(), capture_output=True,
                         text=True, timeout=60)
    assert json.loads(out.stdout)["pending"] == 0

    t0 = time.monotonic()
    assert r.stop() == 0, r.stderr()
    assert time.monotonic() - t0 < 30
    assert not os.path.exists(r.socket)
    offs = committed(kbroker.bootstrap, group)
    assert sum(offs.values()) == 300
    assert "stopped" in r.stderr()


def test_ctl_without_a_runtime_says_so(tmp_path) -> None:
    out = subprocess.run([sys.executable, "-m", "kcodec", "ctl", "status", "--state-dir",
                          str(tmp_path)], env=env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "no runtime control socket" in out.stderr and "kcodec run" in out.stderr


def test_retries_then_failed_queue_and_dead_letters(kbroker, run_factory) -> None:
    topic, group, dlq = name("t"), name("g"), name("dlq")
    produce(kbroker.bootstrap, topic, 40)
    r = run_factory(kbroker.bootstrap, topic, group, "--retries", "2", "--backoff-ms", "100",
                    "--dead-letter-topic", dlq, mode="fail-odd")
    want = all_offsets(40, topic)
    odd = {k for k in want if k[2] % 2}

    def settled() -> bool:
        h = r.handled()
        return set(h) == want and all(h[k] == 3 for k in odd) and \
            r.ctl("backlog")["failed"] == len(odd)
    wait_for(settled, 60, "odd offsets tried 3 times, then failed", r.stderr)
    h = r.handled()
    assert all(h[k] == 1 for k in want - odd)
    failed = r.ctl("failed", limit=100)
    assert len(failed) == len(odd)
    assert {f["attempts"] for f in failed} == {3}
    assert {f["error"] for f in failed} == {"the handler returned False"}
    # the dead-letter topic: the records as they were, with where they came from and why
    with Consumer(bootstrap_servers=kbroker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(dlq, p) for p in range(4)])
        got: list = []
        deadline = time.monotonic() + 30
        while len(got) < len(odd) and time.monotonic() < deadline:
            for recs in c.poll(0.5).values():
                got += recs
    assert len(got) == len(odd)
    hdr = dict(got[0].headers)
    src = (hdr["kcodec.dlq.topic"].decode(), int(hdr["kcodec.dlq.partition"]),
           int(hdr["kcodec.dlq.offset"]))
    assert src in odd and hdr["kcodec.dlq.attempts"] == b"3"
    assert hdr["kcodec.dlq.error"] == b"the handler returned False"
    # requeue: back to pending, attempts from 0 (they fail again, and come back)
    assert r.ctl("requeue") == {"requeued": len(odd)}
    wait_for(lambda: all(r.handled()[k] == 6 for k in odd), 60, "requeued records retried",
             r.stderr)
    wait_for(lambda: r.ctl("backlog")["failed"] == len(odd), 30, "failed again")
    assert r.ctl("clear") == {"cleared": len(odd)}
    assert r.ctl("backlog")["failed"] == 0
    assert r.stop() == 0


@pytest.mark.parametrize("handler, args", [
    ("tests.runtime.handlers:one", ("--handle", "record")),
    ("tests.runtime.handlers:some", ()),
    ("tests.runtime.handlers:one", ("--handle", "record", "--storage", "direct")),
    ("tests.runtime.handlers:one", ("--handle", "record", "--storage", "redis")),
    ("tests.runtime.handlers:some", ("--storage", "redis")),
], ids=["per-record", "batch-fails-some", "per-record-direct", "per-record-redis",
        "batch-fails-some-redis"])
def test_one_records_failure_retries_that_record_alone(kbroker, run_factory, handler,
                                                       args, request) -> None:
    topic, group = name("t"), name("g")
    produce(kbroker.bootstrap, topic, 200)
    if "redis" in args:     # a real redis-server's store
        args += tuple(store_args("redis", request)[2:])
    r = run_factory(kbroker.bootstrap, topic, group, "--backoff-ms", "100", *args,
                    handler=handler)
    want = all_offsets(200, topic)
    bad = {k for k in want if k[2] % 25 == 0}
    wait_for(lambda: set(r.handled()) == want and all(r.handled()[k] == 2 for k in bad), 60,
             "each failing record retried once", r.stderr)
    h = r.handled()
    # a batch of up to 500 had failing records in it: only those came back
    assert all(h[k] == 1 for k in want - bad), sorted(k for k in want - bad if h[k] != 1)[:5]
    assert r.ctl("backlog")["failed"] == 0
    assert r.stop() == 0


@pytest.mark.parametrize("storage", ["file", "direct"])
def test_runtime_processes_freeze_what_they_imported(kbroker, run_factory, storage) -> None:
    """The process running the handler (a sinker; a puller in direct mode) froze what it had
    set up out of the cyclic GC's reach and raised the young threshold: under CPython's
    defaults a puller spent a sixth of its time walking its imports in full collections."""
    from kcodec.runtime.child import GC_YOUNG_THRESHOLD

    topic, group = name("t"), name("g")
    produce(kbroker.bootstrap, topic, 50, partitions=1)
    r = run_factory(kbroker.bootstrap, topic, group, "--storage", storage,
                    handler="tests.runtime.handlers:gc_state")
    wait_for(lambda: os.path.exists(r.log) and open(r.log).read().strip(), 60,
             "the handler ran", r.stderr)
    pid, frozen, young = open(r.log).read().split()[:3]
    assert int(pid) in r.child_pids("puller" if storage == "direct" else "sinker")
    # the store, the client and the runtime's modules: thousands of objects
    assert int(frozen) > 5_000, frozen
    assert int(young) == GC_YOUNG_THRESHOLD
    assert r.stop() == 0


@pytest.mark.parametrize("mode, words", [
    ("raise", "RuntimeError: the test handler fails on purpose"),
    ("wrong-count", "the handler returned 9 results for 10 records"),
    ("not-bool", "the handler returned 'yes' among its results"),
])
def test_bad_handlers_fail_their_batch_clearly(kbroker, run_factory, mode, words) -> None:
    topic, group = name("t"), name("g")
    produce(kbroker.bootstrap, topic, 10, partitions=1)
    r = run_factory(kbroker.bootstrap, topic, group, "--retries", "0", "--linger-ms", "500",
                    mode=mode)
    wait_for(lambda: r.ctl("backlog")["failed"] == 10, 60, "all in the failed queue", r.stderr)
    errors = {f["error"] for f in r.ctl("failed", limit=20)}
    assert len(errors) == 1 and words in errors.pop()
    assert words in r.stderr()
    assert all(p["restarts"] == 0 for p in r.ctl("status")["processes"])
    assert r.stop() == 0


@pytest.mark.parametrize("storage", ["file", "direct"])
def test_a_hung_handler_is_failed_and_its_process_restarted(kbroker, run_factory, storage) -> None:
    topic, group = name("t"), name("g")
    produce(kbroker.bootstrap, topic, 20)
    r = run_factory(kbroker.bootstrap, topic, group, "--storage", storage, "--retries", "3",
                    "--backoff-ms", "100", "--handler-timeout", "1", mode="hang")
    want = all_offsets(20, topic)
    # a batch of first deliveries hangs; after the restart the retries go through
    wait_for(lambda: set(r.handled()) >= want, 60, "every record handled", r.stderr)
    st = r.ctl("status")
    worker = "puller" if storage == "direct" else "sinker"
    assert any(p["restarts"] >= 1 for p in st["processes"] if p["role"] == worker)
    err = r.stderr()
    assert "the handler ran past its deadline of 1 s" in err
    assert "its handler ran past --handler-timeout" in err
    wait_for(lambda: r.ctl("backlog")["pending"] + r.ctl("backlog")["delayed"] == 0, 30,
             "the retries drained")
    assert r.stop() == 0


def test_async_handler_past_its_deadline_is_cancelled(kbroker, run_factory) -> None:
    topic, group = name("t"), name("g")
    produce(kbroker.bootstrap, topic, 5, partitions=1)
    r = run_factory(kbroker.bootstrap, topic, group, "--retries", "0", "--handler-timeout", "0.5",
                    handler="tests.runtime.handlers:record_async", mode="hang")
    wait_for(lambda: r.ctl("backlog")["failed"] == 5, 60, "failed", r.stderr)
    assert all(p["restarts"] == 0 for p in r.ctl("status")["processes"])  # cancelled, no restart
    assert "was cancelled" in r.ctl("failed")[0]["error"]
    assert r.stop() == 0


def test_undecodable_values_fail_for_good(kbroker, run_factory) -> None:
    topic, group = name("t"), name("g")
    produce(kbroker.bootstrap, topic, 6, partitions=1,
            value=lambda i: b'{"n": %d}' % i if i % 2 == 0 else b"not json")
    r = run_factory(kbroker.bootstrap, topic, group, "--decode", "json", "--retries", "3",
                    handler="tests.runtime.handlers:values")
    wait_for(lambda: r.ctl("backlog")["failed"] == 3, 60, "bad values failed", r.stderr)
    lines = open(r.log).read().splitlines()
    assert sorted(ln.split(" ", 5)[5] for ln in lines) == \
        ["dict:{'n': 0}", "dict:{'n': 2}", "dict:{'n': 4}"]
    failed = r.ctl("failed")
    assert {f["attempts"] for f in failed} == {1}          # no retries: they would not help
    assert all(f["error"].startswith("undecodable: value is not JSON") for f in failed)
    assert r.stop() == 0


def test_memory_limit_restarts_after_the_batch(kbroker, run_factory) -> None:
    topic, group = name("t"), name("g")
    # enough batches (20 MB and 0.3 s each) that the master's once-a-second look at the RSS
    # comes while there is work left
    produce(kbroker.bootstrap, topic, 150, partitions=1)
    r = run_factory(kbroker.bootstrap, topic, group, "--max-rss-mb", "120", "--batch-size", "5",
                    mode="leak")
    want = all_offsets(150, topic, 1)
    wait_for(lambda: set(r.handled()) >= want, 90, "every record handled", r.stderr)
    # the restart is the sinker's own exit once its batch is done, and the master's reaping
    # of it: it may come a moment after the last record was handled, so wait for it (it
    # was asserted at once, and failed when the leak passed the limit on the last batch)
    wait_for(lambda: any(p["restarts"] >= 1 for p in r.ctl("status")["processes"]
                         if p["role"] == "sinker"), 30, "a sinker restarted", r.stderr)
    assert "over --max-rss-mb 120" in r.stderr()
    assert "after passing the memory limit" in r.stderr()
    # looked at often enough to act near the limit: a batch adds 20 MB in 0.3 s
    import re
    seen = [int(x) for x in re.findall(r"uses (\d+) MB, over --max-rss-mb", r.stderr())]
    assert seen and max(seen) <= 120 + 25, seen
    # after the batch, not in it: a sinker stopped mid-batch would leave its lease to
    # expire and the batch to be handed out again
    assert max(r.handled().values()) == 1, r.stderr()
    assert r.stop() == 0


def test_second_signal_stops_at_once(kbroker, run_factory) -> None:
    topic, group = name("t"), name("g")
    produce(kbroker.bootstrap, topic, 50, partitions=1)
    r = run_factory(kbroker.bootstrap, topic, group, "--batch-size", "1", "--grace", "60",
                    mode="slow", extra_env={"KCODEC_TEST_SLEEP": "30"})
    r.wait_ready()
    wait_for(lambda: r.ctl("status")["processes"][1]["in_hand"] == 1, 30, "a batch in hand")
    assert r.proc is not None
    r.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    assert r.proc.poll() is None               # the first waits for the batch in hand
    r.proc.send_signal(signal.SIGTERM)
    assert r.proc.wait(10) == 128 + signal.SIGTERM
    assert "second signal" in r.stderr()


def test_python_entry_point(kbroker, tmp_path) -> None:
    topic, group = name("t"), name("g")
    produce(kbroker.bootstrap, topic, 10, partitions=1)
    log = tmp_path / "seen"
    script = tmp_path / "app.py"
    script.write_text(f"""
from kcodec.runtime import App

app = App(topics=[{topic!r}], group={group!r}, bootstrap={kbroker.bootstrap!r},
          storage="direct", state_dir={str(tmp_path / 'state')!r})

@app.handler
def handle(records):
    with open({str(log)!r}, "a") as f:
        f.writelines(f"{{r.offset}}\\n" for r in records)
    return [True] * len(records)

if __name__ == "__main__":
    raise SystemExit(app.run())
""")
    p = subprocess.Popen([sys.executable, str(script)], env=env(), cwd=ROOT,
                         stderr=subprocess.PIPE)
    try:
        wait_for(lambda: log.exists() and len(log.read_text().split()) >= 10, 60, "handled")
    finally:
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err.decode()
    assert sorted(map(int, log.read_text().split())) == list(range(10))


def test_usage_errors(tmp_path) -> None:
    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "kcodec", "run", *argv], env=env(),
                              capture_output=True, text=True, timeout=60, cwd=ROOT)
    out = run("tests.runtime.handlers:record", "-t", "x")
    assert out.returncode == 2 and "no group" in out.stderr
    out = run("tests.runtime.handlers:nope", "-t", "x", "-g", "g")
    assert out.returncode == 2 and "has no 'nope'" in out.stderr
    out = run("tests.runtime.handlers:record", "-t", "x", "-g", "g", "-X", "nosuch=1")
    assert out.returncode == 2 and "unknown client setting 'nosuch'" in out.stderr
    out = run("tests.runtime.handlers:record", "-t", "x", "-g", "g", "--storage", "disk")
    assert out.returncode == 2 and "--storage must be one of" in out.stderr
    out = run("tests.runtime.handlers:record", "-t", "x", "-g", "g", "-X",
              "sasl_password=s3cret", "--print-config")
    assert out.returncode == 0 and "s3cret" not in out.stdout
    assert json.loads(out.stdout)["client"] == {"sasl_password": "***"}


def test_read_log_ignores_torn_lines(tmp_path) -> None:
    p = tmp_path / "log"
    p.write_text("t 0 1 0 1 done\nt 0 2 0 1 done\nt 0 3")
    assert sorted(read_log(str(p))) == [("t", 0, 1), ("t", 0, 2)]


def test_readme_quickstart_works_as_written(tmp_path) -> None:
    """The README's three terminals (its `kcodec run` quickstart), on a free port
    (KCODEC_BOOTSTRAP) and in a scratch directory beside a copy of examples/."""
    import re
    import shutil

    from kcodec.testing.net import free_port

    readme = project_text("README.md")
    block = readme.split("## Quickstart: `kcodec run`", 1)[1].split("```sh\n", 1)[1]
    lines = [ln.split("#")[0].strip() for ln in block.split("```", 1)[0].splitlines()]
    assert [ln.split()[1] for ln in lines] == ["broker", "10", "run", "ctl"], lines
    port = free_port()
    shutil.copytree(ROOT_PATH / "examples", tmp_path / "examples")
    e = env(KCODEC_BOOTSTRAP=f"127.0.0.1:{port}")
    kcodec = [sys.executable, "-m", "kcodec"]
    broker = subprocess.Popen(kcodec + lines[0].split()[1:-2] + ["--port", str(port)], env=e,
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    run = None
    try:
        assert broker.stdout is not None and broker.stdout.readline()
        cmd, _, feed = lines[1].partition("|")
        p = subprocess.run(kcodec + feed.split()[1:], input="".join(f"{i}\n" for i in range(1, 11)),
                           env=e, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        run = subprocess.Popen(kcodec + lines[2].split()[1:], env=e, cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        got: list[str] = []
        assert run.stdout is not None
        while len(got) < 10:
            line = run.stdout.readline()
            assert line, run.stderr.read() if run.stderr else ""
            got.append(line)
        assert sorted(int(re.search(r"b'(\d+)'", g).group(1)) for g in got) == list(range(1, 11))
        st = subprocess.run(kcodec + lines[3].split()[1:], env=e, cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
        assert st.returncode == 0 and "sinker" in st.stdout, st.stderr
    finally:
        if run is not None:
            run.send_signal(signal.SIGINT)
            run.wait(60)
        broker.send_signal(signal.SIGINT)
        broker.wait(30)
    assert run.returncode == 0


def test_direct_handler_slower_than_max_poll_interval_keeps_the_membership(kbroker,
                                                                           run_factory) -> None:
    """Each call takes 4 s with max_poll_interval_ms at 3 s: the puller keeps polling
    (partitions paused) meanwhile, so it is never dropped from the group and no record is
    handled twice."""
    topic, group = name("t"), name("g")
    produce(kbroker.bootstrap, topic, 8, partitions=1)
    r = run_factory(kbroker.bootstrap, topic, group, "--storage", "direct", "--batch-size", "2",
                    "--linger-ms", "0", "-X", "max_poll_interval_ms=3000", "--handler-timeout",
                    "20", mode="slow", extra_env={"KCODEC_TEST_SLEEP": "4"})
    want = all_offsets(8, topic, 1)
    wait_for(lambda: set(r.handled()) >= want, 90, "every record handled", r.stderr)
    assert max(r.handled().values()) == 1
    err = r.stderr()
    assert "partitions lost" not in err and "max_poll_interval" not in err
    assert r.stop() == 0


def test_a_corrupt_batch_from_the_broker_is_named_and_the_puller_restarts(tmp_path) -> None:
    """A batch whose CRC does not match (a byte flipped in the broker's segment while it
    was down): the puller logs the topic, partition and offset and what to do, exits 5, and
    is restarted with backoff; nothing of the batch reaches the handler, nothing is committed
    past it."""
    import glob

    from tests.runtime.support import Broker

    b = Broker(partitions=1)
    topic, group = name("t"), name("g")
    r = None
    try:
        produce(b.bootstrap, topic, 20, partitions=1)
        assert b.proc is not None
        b.proc.send_signal(signal.SIGINT)
        b.proc.wait(20)
        (seg,) = glob.glob(os.path.join(b.dir, "logs", f"{topic}-0", "*.log"))
        data = bytearray(open(seg, "rb").read())
        data[70] ^= 0xFF      # inside the first batch's records, after its header
        with open(seg, "wb") as f:
            f.write(bytes(data))
        b.start()
        r = Run(b.bootstrap, topic, group, "--storage", "direct", "--pullers", "1",
                state_dir=str(tmp_path))
        wait_for(lambda: r.stderr().count("exited with code 5") >= 2, 60,
                 "the puller exiting 5 twice", r.stderr)
        err = r.stderr()
        assert f"the record batch of {topic}[0] at offset 0 does not decode" in err
        assert "CRC-32C mismatch" in err and "kcodec dump-log" in err
        assert "a fetched record batch does not decode: see its log); restarting in" in err
        assert not read_log(r.log)
        assert committed(b.bootstrap, group).get(TopicPartition(topic, 0), 0) == 0
    finally:
        if r is not None:
            r.kill_all()
        b.close()


def test_direct_revocation_finishes_and_commits_the_batch_in_hand(kbroker, run_factory) -> None:
    """A second member joins while the direct-mode handler works on a batch (3 s a batch):
    the revocation waits for that batch, commits it with the partitions, and the new member
    starts after it -- no record of the batch is handed to anyone twice."""
    topic, group = name("t"), name("g")
    produce(kbroker.bootstrap, topic, 20, partitions=1)
    # the classic protocol, so the range assignor decides where the one partition goes (the
    # consumer protocol's broker-side assignor leaves it where it is); the revocation path
    # in the runtime is the same for both
    r = run_factory(kbroker.bootstrap, topic, group, "--storage", "direct", "--batch-size", "4",
                    "--linger-ms", "0", "--handler-timeout", "30", "-X", "group_protocol=classic",
                    mode="slow", extra_env={"KCODEC_TEST_SLEEP": "3"})
    r.wait_ready()
    wait_for(lambda: r.ctl("status")["processes"][0]["in_hand"] >= 1, 60, "a batch in hand",
             r.stderr)
    other: list = []
    # the range assignor gives the one partition to the member id first in order: this one
    with Consumer(bootstrap_servers=kbroker.bootstrap, group_id=group, auto_offset_reset="earliest",
                  enable_auto_commit=False, session_timeout_ms=10000, client_id="0-joiner",
                  heartbeat_interval_ms=500, group_protocol="classic") as c:
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not c.assignment():
            for tp, recs in c.poll(0.2).items():
                other.extend((tp.partition, rec.offset) for rec in recs)
        assert c.assignment(), r.stderr()
        mine = set(c.assignment())
        for _ in range(15):
            for tp, recs in c.poll(0.2).items():
                other.extend((tp.partition, rec.offset) for rec in recs)
    assert "was in hand: it was finished first and is committed with them" in r.stderr()
    handled = {(p, o) for t, p, o in r.handled()}
    taken = {(p, o) for p, o in other}
    assert mine == {TopicPartition(topic, 0)} and taken, r.stderr()
    assert not handled & taken, (sorted(handled & taken), r.stderr())


@pytest.mark.parametrize("storage", ["file", "redis"])
def test_one_sinker_keeps_each_partitions_order(kbroker, run_factory, storage, request) -> None:
    """What the guide says keeps per-partition order with a store (--sinkers 1): each
    partition's records reach the handler in offset order (several sinkers may not)."""
    topic, group = name("t"), name("g")
    produce(kbroker.bootstrap, topic, 2000)
    args = store_args(storage, request) + ["--sinkers", "1", "--batch-size", "50"]
    r = run_factory(kbroker.bootstrap, topic, group, *args,
                    extra_env={"KCODEC_RUN_CLIENT_GROUP_PROTOCOL": "classic"})
    want = all_offsets(2000, topic)
    wait_for(lambda: set(r.handled()) == want, 60, "every record handled", r.stderr)
    order: dict[int, list[int]] = {}
    for _t, p, off in r.handled():       # in the order the handler first saw them
        order.setdefault(p, []).append(off)
    assert sorted(order) == [0, 1, 2, 3]
    for p, offs in order.items():
        assert offs == sorted(offs), (p, [b for a, b in pairwise(offs) if b < a][:5])
    assert r.stop() == 0
