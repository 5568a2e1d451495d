"""One broker node: an acceptor, its processors, a request channel and a handler pool,
serving the cluster's shared state under its own node id and port."""

from __future__ import annotations

from typing import Any

from kcodec.broker.apis import dispatch
from kcodec.broker.apis.fetch import FetchSessions
from kcodec.broker.network import Acceptor, HandlerPool, Processor, RequestChannel
from kcodec.broker.network.acceptor import listen

__all__ = ["Node"]


class Node:
    def __init__(self, cluster: Any, node_id: int, host: str, port: int, *, processors: int = 2,
                 handlers: int = 4, max_request_bytes: int = 100 * 1024 * 1024,
                 queued_max_bytes: int = 100 * 1024 * 1024, idle_timeout_s: float = 600.0,
                 security: Any = None) -> None:
        self.cluster = cluster
        self.security = security   # kcodec.broker.security.ListenerSecurity (TLS, SASL)
        self.id = node_id
        self.host = host
        self.port = port
        self.n_processors = processors
        self.n_handlers = handlers
        self.max_request_bytes = max_request_bytes
        self.queued_max_bytes = queued_max_bytes
        self.idle_timeout_s = idle_timeout_s
        self.running = False
        self.fetch_sessions = FetchSessions()
        self._parts: tuple = ()

    def start(self) -> None:
        if self.running:
            return
        sock = listen(self.host, self.port)
        self.port = sock.getsockname()[1]   # kept for a restart on the same port
        channel = RequestChannel(self.queued_max_bytes)
        procs = [Processor(self.id, i, channel, max_request_bytes=self.max_request_bytes,
                           idle_timeout_s=self.idle_timeout_s, security=self.security)
                 for i in range(self.n_processors)]
        pool = HandlerPool(channel, lambda req: dispatch(self, req), self.n_handlers,
                           f"kcodec-broker-{self.id}")
        acceptor = Acceptor(sock, procs, f"kcodec-broker-{self.id}-acceptor")
        for p in procs:
            p.start()
        pool.start()
        acceptor.start()
        self.channel = channel
        self._parts = (acceptor, procs, pool)
        self.fetch_sessions = FetchSessions()
        self.running = True

    @property
    def connections(self) -> int:
        """Open client connections."""
        return sum(len(p.connections) for p in self._parts[1]) if self._parts else 0

    def stop(self) -> None:
        if not self.running:
            return
        self.running = False
        acceptor, procs, pool = self._parts
        acceptor.stop()
        for p in procs:
            p.stop()
        pool.stop()
        self._parts = ()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __repr__(self) -> str:
        return f"Node({self.id}, {self.address}, {'up' if self.running else 'down'})"
