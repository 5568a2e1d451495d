"""The runtime's HTTP health endpoint (``--health-port``), for a supervisor's liveness and
readiness probes (Kubernetes, a load balancer, systemd's watchdog scripts):

    GET /health   200 while the master's loop runs (it ticks at least every 0.5 s), else 503
    GET /ready    200 once every process runs, every puller has joined its group (or, with
                  --assign, holds its partitions) and the store answers; else 503

Each answers a JSON object saying what it found (``{"ready": false, "why": [...]}``).
Plain ``http.server`` on a thread of its own: no extra to install.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["HealthServer"]

log = logging.getLogger(__name__)


class HealthServer:
    """Serves ``/health`` and ``/ready`` from ``check()``: (alive, ready, details)."""

    def __init__(self, port: int, check: Callable[[], tuple[bool, bool, dict[str, Any]]],
                 addr: str = "127.0.0.1") -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:   # noqa: N802 - http.server's name
                path = self.path.split("?", 1)[0].rstrip("/")
                if path not in ("/health", "/ready"):
                    self._send(404, {"error": "GET /health or /ready"})
                    return
                try:
                    alive, ready, details = outer.check()
                except Exception as exc:   # a probe must get an answer
                    alive, ready, details = True, False, {"why": [f"{type(exc).__name__}: {exc}"]}
                ok = alive if path == "/health" else alive and ready
                self._send(200 if ok else 503, {"alive": alive, "ready": ready, **details})

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body, default=str).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:   # probes every few seconds: quiet
                pass

        self.check = check
        self._server = ThreadingHTTPServer((addr, port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.addr = addr
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="kcodec-health")
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class Ticker:
    """The master's loop ticks it; alive while the last tick is recent."""

    def __init__(self, within: float = 5.0) -> None:
        self.at = time.monotonic()
        self.within = within

    def tick(self) -> None:
        self.at = time.monotonic()

    @property
    def alive(self) -> bool:
        return time.monotonic() - self.at < self.within
