"""kcodec's source and sink on a real Spark standalone cluster (a master and two workers as
JVMs of their own, started from pyspark's launcher on loopback with free ports; one
cluster for the whole session) and through a Spark Connect server on it: spark-submit of
the example job with a packed venv (an executor Python other than the driver's), of `kcodec
pipeline`, a worker killed mid-job, a Connect client that registers, reads and writes.
Every count exact. Slow step only."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="kcodec.spark needs pyspark (the spark/test extras)")
pytest.importorskip("pyarrow")

from tests.support import REPO  # noqa: E402
from tests.support.spark_cluster import (  # noqa: E402
    ConnectServer,
    run,
    spark_env,
    spark_home,
)

pytestmark = pytest.mark.slow

JOBS = Path(__file__).resolve().parent / "jobs"
EXAMPLE = REPO / "examples" / "spark_cluster_job.py"
N = 20_000          # records in the shared topic
KEYS = 10


@pytest.fixture(scope="session")
def cluster(spark_cluster):
    return spark_cluster     # (tests/spark/conftest.py: one cluster for every module)


@pytest.fixture(scope="module")
def kbroker():
    """kcodec's broker (memory storage) on 127.0.0.1: every executor of this machine's
    cluster reaches it."""
    from kcodec.broker import Cluster

    c = Cluster(1, num_partitions=4, transaction_two_phase_commit_enable=True).start()
    yield c
    c.stop()


def _fill(bootstrap: str, topic: str, n: int = N) -> None:
    from kcodec.client import Admin, Producer

    with Admin(bootstrap_servers=bootstrap) as a:
        assert a.create_topics([topic], num_partitions=4)[topic] is None
    with Producer(bootstrap_servers=bootstrap, compression_type="lz4") as p:
        for i in range(n):
            p.send(topic, b"v%06d" % i, key=b"user-%d" % (i % KEYS))
        p.flush()


@pytest.fixture(scope="module")
def events(kbroker):
    topic = f"cl-{uuid.uuid4().hex[:8]}"
    _fill(kbroker.bootstrap, topic)
    return topic


def _read_all(bootstrap: str, topic: str) -> list[bytes]:
    from kcodec.client import Admin, Consumer, TopicPartition

    with Admin(bootstrap_servers=bootstrap) as a:
        ends = a.list_offsets([(topic, p) for p in range(4)], "latest")
    want = sum(ends.values())
    out: list[bytes] = []
    c = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    try:
        c.assign([TopicPartition(*tp) for tp in ends])
        deadline = time.monotonic() + 60
        while len(out) < want and time.monotonic() < deadline:
            for recs in c.poll(1.0).values():
                out += [r.value for r in recs]
    finally:
        c.close()
    return out


def _packed_env(root: Path) -> Path:
    """The Spark guide's packed-venv recipe (docs/guide/spark.md), cut down to what the test needs: a venv made with
    --copies (no absolute symlink to the system's python), kcodec inside it, pyarrow and
    numpy from this venv (a .pth: the test does not copy 250 MB), packed without "./"
    entries. Returns the archive."""
    env = root / "kcodec-env"
    if env.exists():
        shutil.rmtree(env)
    subprocess.run([sys.executable, "-m", "venv", "--copies", "--without-pip", str(env)],
                   check=True)
    pyver = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = env / "lib" / pyver / "site-packages"
    shutil.copytree(REPO / "kcodec", site / "kcodec",
                    ignore=shutil.ignore_patterns("__pycache__", "*.c", "*.html"))
    (site / "driver-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    archive = root / "kcodec-env.tar.gz"
    names = sorted(os.listdir(env))
    subprocess.run(["tar", "-czf", str(archive), "-C", str(env), *names], check=True)
    return archive


def _json_line(out: str) -> dict:
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    assert lines, out[-3000:]
    return dict(json.loads(lines[-1]))


def _fail_text(p: subprocess.CompletedProcess) -> str:
    return f"exit {p.returncode}\nstdout: {p.stdout[-3000:]}\nstderr: {p.stderr[-6000:]}"


def _unpacked_here(tmp_path: Path) -> Path:
    """The packed venv, and its copy unpacked as ./env where spark-submit runs (the driver
    plans Python data sources with the same ./env/bin/python)."""
    archive = _packed_env(tmp_path)
    (tmp_path / "env").mkdir()
    subprocess.run(["tar", "-xzf", str(archive), "-C", str(tmp_path / "env")], check=True)
    return archive


def test_example_job_with_a_packed_venv_on_the_pure_python_twins(cluster, kbroker, events,
                                                                 tmp_path) -> None:
    """The Spark guide's recipe end to end, with the executors told to run the pure-Python
    twins (KCODEC_NO_EXTENSIONS=1 in their environment): exact counts, and each executor
    says once on its stderr that it runs them."""
    archive = _unpacked_here(tmp_path)
    out_dir = tmp_path / "by-key"
    results = f"res-{uuid.uuid4().hex[:8]}"
    p = cluster.submit(["--archives", f"{archive}#env", str(EXAMPLE),
                        "--bootstrap", kbroker.bootstrap, "--topic", events,
                        "--out", f"file://{out_dir}", "--results", results],
                       conf={"spark.pyspark.python": "./env/bin/python",
                             "spark.executorEnv.KCODEC_NO_EXTENSIONS": "1"}, cwd=tmp_path)
    assert p.returncode == 0, _fail_text(p)
    got = _json_line(p.stdout)
    assert got == {"master": cluster.url, "records": N, "keys": KEYS, "written": KEYS}
    values = _read_all(kbroker.bootstrap, results)
    assert sorted(json.loads(v)["records"] for v in values) == [N // KEYS] * KEYS
    apps = {a.name for w in cluster.work_dirs for a in w.glob("app-*")}
    logs = [log for app in apps for log in cluster.executor_logs(app)
            if (log.parent / "env" / "bin" / "python").exists()]
    assert len(logs) == 2, logs        # one executor per worker, each unpacked the venv
    for log in logs:      # several tasks and Python workers per executor: told once
        text = log.read_text(errors="replace")
        assert text.count("runs kcodec's pure-Python twins") == 1, (log, text[-3000:])
        assert "Unset KCODEC_NO_EXTENSIONS" in text


def test_a_worker_killed_mid_job_loses_and_repeats_nothing(cluster, kbroker, events,
                                                          tmp_path) -> None:
    started = tmp_path / "started"
    started.mkdir()
    archive = _unpacked_here(tmp_path)
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", cluster.url,
           "--conf", "spark.ui.enabled=false", "--conf", "spark.cores.max=2",
           "--conf", "spark.executor.cores=1", "--conf", "spark.executor.memory=512m",
           "--archives", f"{archive}#env", "--conf", "spark.pyspark.python=./env/bin/python",
           str(JOBS / "slow_count.py"), kbroker.bootstrap, events, str(started)]
    proc = subprocess.Popen(cmd, env=spark_env(None, cluster.conf_dir), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while len(os.listdir(started)) < 4:      # the counting tasks run on both workers
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the job's tasks did not start"
            time.sleep(0.5)
        cluster.kill_worker(1)
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
        cluster.add_worker()       # the session's cluster has two workers again
    assert proc.returncode == 0, f"stdout: {out[-3000:]}\nstderr: {err[-6000:]}"
    got = _json_line(out)
    assert sum(got["counts"].values()) == N
    assert got["counts"] == {str(p): c for p, c in _per_partition(kbroker, events).items()}
    # the executors ran the shipped venv's Python, not the driver's, compiled
    pythons = {e["python"] for e in got["executors"]}
    assert pythons and all(x.endswith("/env/bin/python") for x in pythons), pythons
    assert sys.executable not in pythons
    assert {e["implementation"] for e in got["executors"]} == {"cython"}


def _per_partition(kbroker, topic: str) -> dict[int, int]:
    from kcodec.client import Admin

    with Admin(bootstrap_servers=kbroker.bootstrap) as a:
        ends = a.list_offsets([(topic, p) for p in range(4)], "latest")
    return {tp[1]: n for tp, n in ends.items() if n}


def test_kcodec_pipeline_under_spark_submit_runs_on_its_master(cluster, kbroker,
                                                              tmp_path) -> None:
    main = tmp_path / "pipeline_main.py"
    main.write_text("import sys\nfrom kcodec.cli import main\n"
                    "sys.exit(main(sys.argv[1:]))\n")
    p = cluster.submit([str(main), "pipeline", "-n", "1000", "--bootstrap",
                        kbroker.bootstrap, "--workdir", f"file://{tmp_path / 'work'}"],
                       cwd=tmp_path)
    assert p.returncode == 0, _fail_text(p)
    assert f"master {cluster.url} (from spark-submit)" in p.stdout + p.stderr
    assert "local[2]" not in p.stdout


def test_kcodec_pipeline_master_option(cluster, kbroker, tmp_path) -> None:
    env = spark_env({"PYSPARK_PYTHON": sys.executable}, cluster.conf_dir)
    p = run([sys.executable, "-m", "kcodec", "pipeline", "-n", "1000", "--master",
             cluster.url, "--bootstrap", kbroker.bootstrap],
            env=env, cwd=tmp_path, timeout=900)
    assert p.returncode == 0, _fail_text(p)
    text = p.stdout + p.stderr
    assert f"master {cluster.url} (from --master)" in text
    # a temporary workdir on this machine: said, as executors elsewhere could not use it
    assert "executors on other machines cannot write there" in text


@pytest.fixture(scope="module")
def connect(cluster, tmp_path_factory):
    """A Spark Connect server on the cluster; its Python workers run this venv's Python
    with the checkout under test first on their path."""
    with ConnectServer(tmp_path_factory.mktemp("connect"), cluster.url,
                       env={"PYTHONPATH": str(REPO)},
                       conf={"spark.pyspark.python": sys.executable,
                             "spark.executorEnv.PYTHONPATH": str(REPO)}) as server:
        yield server


def test_spark_connect_client_registers_reads_and_writes(cluster, connect, kbroker, events,
                                                        tmp_path) -> None:
    out_topic = f"cn-{uuid.uuid4().hex[:8]}"
    p = run([sys.executable, str(JOBS / "connect_client.py"), connect.url,
             kbroker.bootstrap, events, out_topic, str(tmp_path / "ck")],
            env=spark_env({"PYTHONPATH": str(REPO)}, cluster.conf_dir),
            cwd=tmp_path, timeout=600)
    assert p.returncode == 0, _fail_text(p)
    got = _json_line(p.stdout)
    assert (got["read"], got["back"], got["distinct_back"]) == (N, N, N)
    # the exactly-once sink's batch write through Connect
    # and a streaming query with it
    assert got["eos"] == {"batch": [N, N], "stream": [N, N]}, got["eos"]
    assert {e["implementation"] for e in got["executors"]} == {"cython"}


def test_kcodec_pipeline_through_spark_connect(cluster, connect, kbroker, tmp_path) -> None:
    p = run([sys.executable, "-m", "kcodec", "pipeline", "-n", "1000", "--remote",
             connect.url, "--bootstrap", kbroker.bootstrap, "--workdir",
             f"file://{tmp_path / 'work'}"], env=spark_env(None, cluster.conf_dir),
            cwd=tmp_path, timeout=900)
    assert p.returncode == 0, _fail_text(p)
    text = p.stdout + p.stderr
    assert f"Spark Connect {connect.url} (from --remote; the server's master: " \
           f"{cluster.url})" in text
