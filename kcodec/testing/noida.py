"""noida-db, a Kafka-compatible broker (a binary inside the `noida-db` wheel), for the tests.

It serves read_committed fetches correctly (aborted transactions hidden), which Tansu and
librdkafka's mock cluster do not. ``Noida()`` starts one on a free loopback port with its
own data directory; ``bootstrap`` is "127.0.0.1:PORT".
"""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
from pathlib import Path

from kcodec.testing.net import free_port

__all__ = ["Noida", "noida_binary"]


def noida_binary() -> Path | None:
    try:
        import noida_db
    except ImportError:
        return None
    path = Path(noida_db.__file__).parent / "noida-db"
    return path if path.exists() else None


class Noida:
    def __init__(self) -> None:
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self._dir = tempfile.TemporaryDirectory(prefix="kcodec-noida-")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 20.0) -> Noida:
        binary = noida_binary()
        if binary is None:
            raise RuntimeError("noida-db is not installed (pip install noida-db)")
        self.proc = subprocess.Popen(
            [str(binary), "start", "--only", "kafka", "--kafka-port", str(self.port),
             "--data-dir", self._dir.name],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"noida-db exited with {self.proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("noida-db did not start listening")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
            self.proc = None

    def __enter__(self) -> Noida:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._dir.cleanup()
