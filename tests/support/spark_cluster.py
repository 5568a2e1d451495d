"""A real Spark standalone cluster for tests: a master and workers as separate JVMs,
started with pyspark's own launcher (``bin/spark-class``, the script ``sbin/start-master.sh``
and ``sbin/start-worker.sh`` call; the pyspark wheel ships ``spark-class`` but not those two),
on loopback with free ports, and a Spark Connect server on it (``spark-submit --class
org.apache.spark.sql.connect.service.SparkConnectServer``, the class
``sbin/start-connect-server.sh`` starts; its jar is in the wheel).

    with StandaloneCluster(tmp, workers=2) as cluster:
        r = cluster.submit(["job.py", "arg"], env=...)       # spark-submit --master ...
        cluster.kill_worker(1)                                # SIGKILL, as a crash
        cluster.add_worker()

Every process it starts is its own (a process group each) and is stopped at the end, the
executors the workers started included.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from kcodec.testing import free_port

__all__ = ["StandaloneCluster", "ConnectServer", "spark_home", "spark_env"]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_env(extra: dict[str, str] | None = None, conf_dir: Path | None = None
              ) -> dict[str, str]:
    """An environment for Spark's launchers: loopback, small daemons, no user's Spark
    settings (SPARK_CONF_DIR is ours), this venv's bin first on PATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYSPARK_", "SPARK_")) and k not in ("MASTER", "PYTHONPATH")}
    env.update({
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": "256m",
        "PATH": os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""),
        "PYTHONDONTWRITEBYTECODE": "1",
    })
    if conf_dir is not None:
        env["SPARK_CONF_DIR"] = str(conf_dir)
    env.update(extra or {})
    return env


def _wait(what: str, ok: Any, timeout: float, proc: subprocess.Popen | None = None,
          log: Path | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = ok()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:] if log else ""
            raise RuntimeError(f"{what}: the process ended (exit {proc.returncode})\n{tail}")
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:] if log else ""
            raise RuntimeError(f"{what}: not ready within {timeout:.0f} s\n{tail}")
        time.sleep(0.5)


def _stop(proc: subprocess.Popen, grace: float = 20) -> None:
    """SIGTERM to the process group (a worker's shutdown kills its executors), then
    SIGKILL what is left."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


class StandaloneCluster:
    """A master and ``workers`` workers of ``cores`` cores each on 127.0.0.1."""

    def __init__(self, root: Path, workers: int = 2, cores: int = 2, memory: str = "3g"
                 ) -> None:
        self.root = Path(root)
        self.n_workers, self.cores, self.memory = workers, cores, memory
        self.conf_dir = self.root / "conf"
        self.port = free_port()
        self.ui_port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.master: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen | None] = []
        self.work_dirs: list[Path] = []

    def _launch(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.root / f"{name}.log", "wb")
        with log:
            return subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args],
                                    stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=self.root,
                                    env=spark_env(conf_dir=self.conf_dir),
                                    start_new_session=True)

    def start(self, timeout: float = 240) -> StandaloneCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        self.conf_dir.mkdir(exist_ok=True)
        self.master = self._launch("master", [
            "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
            "--port", str(self.port), "--webui-port", str(self.ui_port)])
        _wait("the Spark master", lambda: self.state() is not None, timeout, self.master,
              self.root / "master.log")
        for _ in range(self.n_workers):
            self.add_worker(wait=False)
        self.wait_workers(self.n_workers, timeout)
        return self

    def add_worker(self, wait: bool = True, timeout: float = 240) -> int:
        i = len(self.workers)
        work = self.root / f"worker{i}"
        work.mkdir(exist_ok=True)
        self.work_dirs.append(work)
        self.workers.append(self._launch(f"worker{i}", [
            "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
            "--port", str(free_port()), "--webui-port", str(free_port()),
            "--cores", str(self.cores), "--memory", self.memory,
            "--work-dir", str(work), self.url]))
        if wait:
            self.wait_workers(self.alive_workers() + 1, timeout)
        return i

    def state(self) -> dict[str, Any] | None:
        """The master's JSON status page, or None while it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/",
                                        timeout=5) as r:
                return dict(json.load(r))
        except OSError:
            return None

    def alive_workers(self) -> int:
        s = self.state() or {}
        return int(s.get("aliveworkers", 0))

    def wait_workers(self, n: int, timeout: float = 240) -> None:
        _wait(f"{n} alive Spark workers", lambda: self.alive_workers() >= n, timeout,
              self.master, self.root / "master.log")

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker ``i`` and its executors, as a machine that goes away."""
        proc = self.workers[i]
        assert proc is not None
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        self.workers[i] = None

    def executor_logs(self, app_id: str) -> list[Path]:
        """The stderr files of ``app_id``'s executors, on every worker."""
        return sorted(p for w in self.work_dirs for p in (w / app_id).glob("*/stderr"))

    def submit(self, args: list[str], *, env: dict[str, str] | None = None,
               conf: dict[str, str] | None = None, cwd: Path | None = None,
               timeout: float = 900) -> subprocess.CompletedProcess:
        """``spark-submit --master <this cluster> [--conf k=v ...] ARGS`` (one executor
        with one core on each of two workers, 512 MiB each)."""
        confs = {"spark.ui.enabled": "false", "spark.cores.max": "2",
                 "spark.executor.cores": "1", "spark.executor.memory": "512m",
                 **(conf or {})}
        cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", self.url]
        for k, v in confs.items():
            cmd += ["--conf", f"{k}={v}"]
        return run(cmd + args, env=spark_env(env, self.conf_dir), cwd=cwd or self.root,
                   timeout=timeout)

    def stop(self) -> None:
        for proc in reversed(self.workers):
            if proc is not None:
                _stop(proc)
        if self.master is not None:
            _stop(self.master)

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def run(cmd: list[str], *, env: dict[str, str], cwd: Path, timeout: float
        ) -> subprocess.CompletedProcess:
    """A command in its own process group, killed whole when it overruns."""
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"{cmd[:3]}... did not finish within {timeout:.0f} s\n"
                             f"stdout: {out[-3000:]}\nstderr: {err[-5000:]}") from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


class ConnectServer:
    """A Spark Connect server (a Spark driver serving gRPC on 127.0.0.1) for ``master``."""

    def __init__(self, root: Path, master: str, env: dict[str, str] | None = None,
                 conf: dict[str, str] | None = None) -> None:
        self.root = Path(root)
        self.master = master
        self.port = free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        self.env = env or {}
        self.conf = conf or {}
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 300) -> ConnectServer:
        self.root.mkdir(parents=True, exist_ok=True)
        confs = {"spark.connect.grpc.binding.address": "127.0.0.1",
                 "spark.connect.grpc.binding.port": str(self.port),
                 "spark.ui.enabled": "false", "spark.cores.max": "2",
                 "spark.executor.cores": "1", "spark.executor.memory": "512m",
                 **self.conf}
        cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", self.master,
               "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
               "--name", "kcodec-tests-connect"]
        for k, v in confs.items():
            cmd += ["--conf", f"{k}={v}"]
        log = self.root / "connect.log"
        with open(log, "wb") as f:
            self.proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.root,
                                         # the launcher sizes this server's driver by
                                         # SPARK_DAEMON_MEMORY, which spark_env keeps
                                         # small for the master and workers
                                         env=spark_env({"SPARK_DAEMON_MEMORY": "1g",
                                                        **self.env}, self.root),
                                         start_new_session=True)
        _wait("the Spark Connect server",
              lambda: "Spark Connect server started at" in log.read_text(errors="replace"),
              timeout, self.proc, log)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)

    def __enter__(self) -> ConnectServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
