"""The acceptor: one thread that accepts connections on a listening socket and hands each
to the next processor in turn (round-robin), as Kafka's ``Acceptor`` does."""

from __future__ import annotations

import errno
import select
import socket
import threading

from kcodec.broker.network.processor import Processor

__all__ = ["Acceptor", "listen"]


_HINTS = {
    errno.EADDRINUSE: "the port is taken (another broker, or another program?): stop that, "
                      "or choose another port (0: a free one)",
    errno.EADDRNOTAVAIL: "no network interface of this machine has that address: use one "
                         "of its own (127.0.0.1; 0.0.0.0 for all)",
    errno.EACCES: "ports below 1024 need privileges: choose a port from 1024 up "
                  "(0: a free one)",
}


def listen(host: str, port: int, what: str = "") -> socket.socket:
    """A listening TCP socket (port 0: a free port). A failure is an ``OSError`` (its errno
    kept) that names the address, ``what`` listens there and what to do."""
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    where = f"cannot listen on {shown}{' for ' + what if what else ''}"
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(512)
    except socket.gaierror as exc:
        sock.close()
        raise OSError(errno.EADDRNOTAVAIL, f"{where}: unknown host {host!r} ({exc.strerror}): "
                      "give an address or a name this machine resolves") from None
    except OSError as exc:
        sock.close()
        hint = _HINTS.get(exc.errno or 0, "")
        raise OSError(exc.errno, f"{where}: {exc.strerror}{': ' + hint if hint else ''}") \
            from None
    sock.setblocking(False)
    return sock


class Acceptor:
    def __init__(self, sock: socket.socket, processors: list[Processor], name: str) -> None:
        self.sock = sock
        self.processors = processors
        self._next = 0
        self._stop = threading.Event()
        # stop() wakes the blocking select through this pair: no polling while idle
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    @property
    def port(self) -> int:
        return self.sock.getsockname()[1]

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self.sock, self._wake_r], [], [])
            except (OSError, ValueError):
                return
            if self.sock not in ready:
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
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._thread.join(5)
        self.sock.close()
        self._wake_r.close()
        self._wake_w.close()
