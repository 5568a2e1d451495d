"""One broker node: per listener an acceptor and its processors, one request channel and one
handler pool, serving the cluster's shared state under its own node id."""

from __future__ import annotations

from typing import Any

from kcodec.broker.apis import dispatch
from kcodec.broker.apis.fetch_sessions import FetchSessions
from kcodec.broker.listeners import Listener
from kcodec.broker.network import Acceptor, HandlerPool, Processor, RequestChannel
from kcodec.broker.network.acceptor import listen
from kcodec.broker.network.channel import QUEUE
from kcodec.broker.network.processor import MAX_UNAUTHENTICATED_BYTES
from kcodec.broker.network.quotas import ConnectionQuotas

__all__ = ["Node"]


class Node:
    def __init__(self, cluster: Any, node_id: int, host: str, port: int, *, processors: int = 2,
                 handlers: int = 4, max_request_bytes: int = 100 * 1024 * 1024,
                 queued_max_bytes: int = 100 * 1024 * 1024, idle_timeout_s: float = 600.0,
                 security: Any = None, listeners: list[Listener] | None = None,
                 max_unauthenticated_bytes: int = MAX_UNAUTHENTICATED_BYTES,
                 request_read_timeout_s: float = 30.0,
                 failed_authentication_delay_ms: int = 100,
                 max_connections: int | None = None, max_connections_per_ip: int | None = None,
                 max_connections_per_ip_overrides: Any = None) -> None:
        self.cluster = cluster
        self.id = node_id
        if not listeners:
            proto = "PLAINTEXT" if security is None else security.protocol
            listeners = [Listener(proto, proto, host, port, security)]
        self.listeners = listeners
        # bound (host, port) per listener name, kept for a restart on the same ports
        self.bound: dict[str, tuple[str, int]] = {ls.name: (ls.host, ls.port) for ls in listeners}
        self.n_processors = processors
        self.n_handlers = handlers
        self.max_request_bytes = max_request_bytes
        self.queued_max_bytes = queued_max_bytes
        self.idle_timeout_s = idle_timeout_s
        self.max_unauthenticated_bytes = max_unauthenticated_bytes
        self.request_read_timeout_s = request_read_timeout_s
        self.failed_authentication_delay_ms = failed_authentication_delay_ms
        self._quota_args = (max_connections, max_connections_per_ip,
                            max_connections_per_ip_overrides)
        ConnectionQuotas(*self._quota_args)          # check the settings now
        self.quotas: ConnectionQuotas | None = None
        self.running = False
        self.fetch_sessions = FetchSessions()
        self._parts: tuple = ()
        from kcodec.broker.metrics import BrokerMetrics
        self.metrics = BrokerMetrics(self)     # kept across restarts, as the node's id is

    # the first listener is the node's default address (bootstrap, repr)
    @property
    def host(self) -> str:
        return self.address_of(self.listeners[0].name)[0]

    @property
    def port(self) -> int:
        return self.address_of(self.listeners[0].name)[1]

    @property
    def security(self) -> Any:
        return self.listeners[0].security

    def listener(self, name: str | None) -> Listener | None:
        for ls in self.listeners:
            if name is None or ls.name == name:
                return ls
        return None

    def address_of(self, name: str | None) -> tuple[str, int]:
        """The advertised ``(host, port)`` of this node on listener ``name`` (KeyError if it
        has no such listener)."""
        ls = self.listener(name)
        if ls is None:
            raise KeyError(f"node {self.id} has no listener {name!r}")
        host, port = self.bound[ls.name]
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1" if host != "::" else "::1"
        return ls.advertised_host or host, ls.advertised_port or port

    def start(self) -> None:
        if self.running:
            return
        config = getattr(self.cluster, "config", None) or {}
        share = config.get("queued.max.request.bytes.per.user", -1)
        channel = RequestChannel(self.queued_max_bytes, max_queued_bytes_per_owner=(
            self.queued_max_bytes // 2 if share is None or share < 0 else share))
        # host names resolved at each start
        quotas = ConnectionQuotas(*self._quota_args,
                                  max_connections_per_user=_per_user(config))
        socks = []
        try:
            for ls in self.listeners:
                host, port = self.bound[ls.name]
                socks.append(listen(host, port, f"listener {ls.name} of node {self.id}"))
        except BaseException:
            for s in socks:
                s.close()
            raise
        acceptors, all_procs = [], []
        for ls, sock in zip(self.listeners, socks, strict=False):
            self.bound[ls.name] = (self.bound[ls.name][0], sock.getsockname()[1])
            procs = [Processor(self.id, i, channel, max_request_bytes=self.max_request_bytes,
                               idle_timeout_s=self.idle_timeout_s, security=ls.security,
                               listener=ls.name,
                               max_unauthenticated_bytes=self.max_unauthenticated_bytes,
                               read_timeout_s=self.request_read_timeout_s,
                               failed_auth_delay_s=self.failed_authentication_delay_ms / 1000,
                               on_close=quotas.release, quotas=quotas)
                     for i in range(self.n_processors)]
            all_procs += procs
            acceptors.append(Acceptor(sock, procs, f"kcodec-broker-{self.id}-{ls.name}-acceptor",
                                      quotas))
        pool = HandlerPool(channel, lambda req: dispatch(self, req), self.n_handlers,
                           f"kcodec-broker-{self.id}")
        inline = config.get("network.inline.requests", True)
        for p in all_procs:
            if inline:
                p.inline = self._inline
            p.start()
        pool.start()
        for a in acceptors:
            a.start()
        self.channel = channel
        self.quotas = quotas
        self._parts = (acceptors, all_procs, pool)
        self.fetch_sessions = FetchSessions()
        self.running = True

    @property
    def handler_idle_s(self) -> float:
        """Seconds the handler threads spent waiting for requests (RequestHandlerAvgIdlePercent)."""
        return self._parts[2].idle_seconds() if self._parts else 0.0

    @property
    def connections(self) -> int:
        """Open client connections."""
        return sum(len(p.connections) for p in self._parts[1]) if self._parts else 0

    def stop(self) -> None:
        if not self.running:
            return
        self.running = False
        acceptors, procs, pool = self._parts
        for a in acceptors:
            a.stop()
        for p in procs:
            p.stop()
        pool.stop()
        self._parts = ()

    @property
    def address(self) -> str:
        return _host_port(self.host, self.port)

    def addresses(self) -> dict[str, str]:
        """``{listener name: "host:port"}`` (an IPv6 host in brackets, as clients take it)."""
        return {ls.name: _host_port(*self.address_of(ls.name)) for ls in self.listeners}

    def _inline(self, req: Any) -> Any:
        """A small Produce or Fetch, on the processor's thread; with test hooks installed
        (which may sleep or block) or requests being recorded, the handler threads'."""
        cluster = self.cluster
        if cluster.hooks.active or cluster.recording:
            return QUEUE
        return dispatch(self, req)

    def __repr__(self) -> str:
        return f"Node({self.id}, {self.address}, {'up' if self.running else 'down'})"


def _per_user(config: Any) -> int | None:
    """``max.connections.per.user`` (INT_MAX, Kafka's "no limit" spelling, is none)."""
    n = config.get("max.connections.per.user")
    return None if n is None or n >= 2**31 - 1 else int(n)


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
