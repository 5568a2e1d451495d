"""The acceptor: one thread that accepts connections on a listening socket and hands each
to the next processor in turn (round-robin), as Kafka's ``Acceptor`` does."""

from __future__ import annotations

import select
import socket
import threading

from kcodec.broker.network.processor import Processor

__all__ = ["Acceptor", "listen"]


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket (port 0: a free port)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(512)
    sock.setblocking(False)
    return sock


class Acceptor:
    def __init__(self, sock: socket.socket, processors: list[Processor], name: str) -> None:
        self.sock = sock
        self.processors = processors
        self._next = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    @property
    def port(self) -> int:
        return self.sock.getsockname()[1]

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self.sock], [], [], 0.1)
            except (OSError, ValueError):
                return
            if not ready:
                continue
            try:
                conn, _addr = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.setblocking(False)
            proc = self.processors[self._next % len(self.processors)]
            self._next += 1
            proc.assign(conn)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()
