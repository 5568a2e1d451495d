"""The acceptor: one thread that accepts connections on a listening socket and hands each
to the next processor in turn (round-robin), as Kafka's ``Acceptor`` does.

It waits with ``selectors.DefaultSelector`` (epoll, kqueue or poll), never ``select.select``:
``select`` cannot watch a descriptor numbered 1024 or more, so in a process that already holds
many open files the listening socket gets such a number. The acceptor then stopped at once
while the kernel went on completing handshakes into the listen backlog, and clients saw a
broker that accepted connections and never answered. A failed ``accept`` (out of
descriptors: EMFILE, ENFILE; out of buffers) is logged and retried after a short pause, as
Kafka's acceptor does; only ``stop()`` ends the thread, and any other end is logged.

Each accepted connection is counted against the node's connection limits
(:class:`~kcodec.broker.network.quotas.ConnectionQuotas`); one past a limit is closed at
once and the refusal logged.
"""

from __future__ import annotations

import errno
import logging
import selectors
import socket
import threading

from kcodec.broker.network.processor import Processor
from kcodec.broker.network.quotas import ConnectionQuotas

__all__ = ["Acceptor", "listen"]

log = logging.getLogger(__name__)

# accept() failures that pass (the backlog keeps the connection until a retry takes it)
_RETRY_ACCEPT = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
_RETRY_PAUSE_S = 0.1


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
    def __init__(self, sock: socket.socket, processors: list[Processor], name: str,
                 quotas: ConnectionQuotas | None = None) -> None:
        self.sock = sock
        self.processors = processors
        self.quotas = quotas
        self._next = 0
        self._starved = False               # accept() is failing for want of descriptors
        self._stop = threading.Event()
        # stop() wakes the blocking wait through this pair: no polling while idle
        self._wake_r, self._wake_w = socket.socketpair()
        # made here, not in the thread: the thread then needs no new descriptor to run
        self._sel = selectors.DefaultSelector()
        self._sel.register(self.sock, selectors.EVENT_READ)
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    @property
    def port(self) -> int:
        return self.sock.getsockname()[1]

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for key, _ in self._sel.select():
                    if key.fileobj is self.sock:
                        self._accept()
        except Exception:
            if not self._stop.is_set():
                log.exception("kcodec broker: acceptor %s stopped; no new connections will "
                              "be accepted on %s", self._thread.name, self._where())

    def _accept(self) -> None:
        """Accept every connection waiting in the backlog (the socket is non-blocking)."""
        while not self._stop.is_set():
            try:
                conn, addr = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:     # the client gave up while it waited
                continue
            except OSError as exc:
                if exc.errno not in _RETRY_ACCEPT:
                    raise
                if not self._starved:     # once per shortage, not every retry
                    self._starved = True
                    log.warning("kcodec broker: cannot accept connections on %s: %s; "
                                "retrying every %.1f s", self._where(), exc.strerror or exc,
                                _RETRY_PAUSE_S)
                self._stop.wait(_RETRY_PAUSE_S)
                return
            if self._starved:
                self._starved = False
                log.info("kcodec broker: accepting connections on %s again", self._where())
            host = str(addr[0]) if isinstance(addr, tuple) and addr else "?"
            quotas = self.quotas
            if quotas is not None:
                why = quotas.admit(host)
                if why is not None:
                    self._refuse(quotas, conn, host, addr, why)
                    continue
            try:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn.setblocking(False)
            except OSError:                    # reset before we looked at it
                conn.close()
                if quotas is not None:
                    quotas.release(host)
                continue
            proc = self.processors[self._next % len(self.processors)]
            self._next += 1
            proc.assign(conn, host)

    def _refuse(self, quotas: ConnectionQuotas, conn: socket.socket, host: str, addr: object,
                why: str) -> None:
        """Log a connection past a limit, then close it at once (the client sees it closed
        only after the line is written, so whoever watches both sees them in that order)."""
        count = quotas.should_log(host)
        if count is not None:
            port = addr[1] if isinstance(addr, tuple) and len(addr) > 1 else "?"
            more = f" ({count} refused from {host} since the last such line)" if count > 1 else ""
            log.warning("kcodec broker: refused a connection from %s:%s on %s: %s%s", host,
                        port, self._where(), why, more)
        try:
            conn.close()
        except OSError:
            pass

    def _where(self) -> str:
        try:
            host, port = self.sock.getsockname()[:2]
        except OSError:
            return "a closed socket"
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def stop(self) -> None:
        self._stop.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._thread.join(5)
        self._sel.close()
        self.sock.close()
        self._wake_r.close()
        self._wake_w.close()
