"""Cluster view shared by producer, consumer and admin: bootstrap, metadata, routing, retries."""

from __future__ import annotations

import asyncio
import random
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from kcodec.client.config import ClientConfig
from kcodec.client.errors import (
    BrokerNotAvailableError,
    ClientClosedError,
    KafkaError,
    KafkaTimeoutError,
    is_retriable,
)
from kcodec.client.net import requests
from kcodec.client.net.conn import BrokerConnection
from kcodec.client.net.core import TOPIC_ID_VERSIONS
from kcodec.client.net.wire import check_request
from kcodec.errors import KcodecError, ProtocolError
from kcodec.observe.log import Debug, get_logger
from kcodec.protocol import ErrorCode, Request
from kcodec.protocol import Response as ResponseBody

log = get_logger(__name__)

R = TypeVar("R", bound=ResponseBody)
T = TypeVar("T")

if TYPE_CHECKING:
    from kcodec.client.metrics import ClientMetrics

# The client's own generator (bootstrap order, backoff jitter): a library must not draw from
# the application's global ``random``, whose sequence a program may have seeded.
_RNG = random.Random()

__all__ = ["Cluster", "TopicInfo", "REFRESH_CODES", "coordinator_channel", "broker_of"]

# Codes after which the metadata is stale (the partition moved, the topic is new or gone,
# its broker failed): those ErrorCode flags invalid-metadata, where Java's exception is an
# InvalidMetadataException, on which its producer and admin client refresh the metadata.
REFRESH_CODES = frozenset(code for code in ErrorCode if code.invalid_metadata)
BOOTSTRAP = -1   # pseudo node ids of bootstrap addresses: -1, -2, ...
# Group and transaction coordinators get a connection of their own to their broker, as in
# Java (its id there is Integer.MAX_VALUE - the broker's id) and librdkafka: a commit or a
# heartbeat must not queue behind a long-poll Fetch on the broker's one data connection.
COORDINATOR_CHANNEL = 2**31 - 1


def coordinator_channel(node_id: int) -> int:
    """The connection id for talking to ``node_id`` as a coordinator."""
    return COORDINATOR_CHANNEL - node_id


def broker_of(conn_id: int) -> int:
    """The broker id a connection id is for (a coordinator channel's broker, or itself)."""
    return COORDINATOR_CHANNEL - conn_id if conn_id > COORDINATOR_CHANNEL // 2 else conn_id


@dataclass
class TopicInfo:
    name: str
    error_code: int
    partitions: dict[int, int] = field(default_factory=dict)          # partition -> leader
    replicas: dict[int, list[int]] = field(default_factory=dict)
    isr: dict[int, list[int]] = field(default_factory=dict)
    is_internal: bool = False
    topic_id: Any = None        # uuid.UUID (KIP-516) when the broker gave one, else None


def _kind(config: ClientConfig) -> str:
    from kcodec.client.config import ConsumerConfig, ProducerConfig

    return ("producer" if isinstance(config, ProducerConfig) else
            "consumer" if isinstance(config, ConsumerConfig) else "admin")


class Cluster:
    """Connections by node id, the metadata cache and leader routing."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.brokers: dict[int, tuple[str, int]] = {}
        self.racks: dict[int, str | None] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.topic_names: dict[Any, str] = {}     # topic id -> name (KIP-516)
        self.cluster_id: str | None = None
        self.controller_id: int = -1
        self._conns: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Task] = {}
        self._meta_time = 0.0
        self._meta_lock: asyncio.Lock | None = None
        self._reaper: asyncio.Task | None = None
        self._made: weakref.WeakSet[BrokerConnection] = weakref.WeakSet()
        self.closed = False
        self.reached = False   # some broker answered the handshake once
        self.last_ok = 0.0     # when a broker last answered a request
        self.last_fail = 0.0   # when a request or a connection attempt last failed
        self.last_error: BaseException | None = None   # and why
        from kcodec.client.net.security import Security
        self.security = Security.of(config)
        # observability: the client's metrics (None: metrics_enabled=False), debug contexts,
        # the statistics task (started with the first connection) and the tracer
        self.debug = Debug(config.debug)
        self.metrics: ClientMetrics | None = None
        if config.metrics_enabled:
            from kcodec.client.metrics import ClientMetrics
            self.metrics = ClientMetrics(_kind(config), config.client_id)
        self._stats: asyncio.Task | None = None
        self._telemetry: Any = None            # KIP-714 (kcodec.client.telemetry)
        self._telemetry_task: asyncio.Task | None = None
        self.stats_parts: dict[str, Callable[[dict], None]] = {}   # fill the statistics
        self.tracing: Any = None
        if config.tracing_enabled:
            from kcodec.observe.tracing import Tracing
            self.tracing = Tracing(config.client_id, config.tracer_provider,
                                   getattr(config, "group_id", None), config.bootstrap[0])

    # --------------------------------------------------------------- connections
    @property
    def request_timeout(self) -> float:
        return self.config.request_timeout_ms / 1000

    async def connection(self, node_id: int) -> BrokerConnection:
        """A live connection to ``node_id`` (negative: a bootstrap address; a
        ``coordinator_channel``: a second connection to that broker)."""
        if self.closed:
            raise ClientClosedError("the client is closed")
        conn = self._conns.get(node_id)
        if conn is not None:
            if conn.alive:
                return conn
            # a lost connection may mean a restarted or replaced broker: re-learn the cluster
            del self._conns[node_id]
            self.invalidate()
        task = self._connecting.get(node_id)
        if task is None:
            broker = broker_of(node_id)
            if node_id < 0:
                host, port = self.config.bootstrap[-node_id - 1]
            elif broker in self.brokers:
                host, port = self.brokers[broker]
            else:
                raise BrokerNotAvailableError(f"unknown broker id {broker}")
            conn = BrokerConnection(host, port, node_id, self.config.client_id, self.request_timeout,
                                    self.security, self.config.receive_message_max_bytes,
                                    self.metrics, self.debug)
            self._made.add(conn)
            task = asyncio.get_running_loop().create_task(
                conn.connect(self.config.socket_connection_setup_timeout_ms / 1000))
            self._connecting[node_id] = task
            task.add_done_callback(self._connected(node_id))
        new: BrokerConnection = await asyncio.shield(task)
        if self.closed:          # closed while connecting: this connection is nobody's
            new.close(ClientClosedError("the client is closed"))
            raise ClientClosedError("the client is closed")
        self.reached = True       # (the connect task's callback made it the node's)
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap_idle())
            if self.config.statistics_interval_ms and self.metrics is not None:
                from kcodec.client.stats import report_statistics
                self._stats = asyncio.get_running_loop().create_task(report_statistics(self))
            if self.config.enable_metrics_push and self.metrics is not None:
                from kcodec.client.telemetry import TelemetryReporter, available
                if available():
                    self._telemetry = TelemetryReporter(self)
                    self._telemetry_task = asyncio.get_running_loop().create_task(
                        self._telemetry.run())
        return new

    def _connected(self, node_id: int) -> Any:
        def done(task: asyncio.Task) -> None:
            # The new connection is registered here, as the connect task ends, not when its
            # first awaiter resumes: between the two, another caller found neither a
            # connection nor a connect in progress and opened a second one. A producer's
            # next batch then went out on the first connection while an earlier batch of
            # the same partition waited for the second, and the broker saw the sequence
            # numbers out of order (an idempotent producer then reset its id and wrote the
            # records again).
            self._connecting.pop(node_id, None)
            if not task.cancelled() and task.exception() is not None:
                self.last_fail, self.last_error = time.monotonic(), task.exception()
            if task.cancelled() or task.exception() is not None or self.closed:
                return
            self._conns[node_id] = task.result()
        return done

    async def any_connection(self, deadline: float | None = None) -> BrokerConnection:
        """A connection to any broker: the live one with the fewest requests in flight, else
        known brokers, then the bootstrap list, with backoff.

        A client that has never reached a broker gives up at once when every address
        answered definitely (refused, unknown host, not Kafka); otherwise it retries until
        ``deadline`` (default: ``api_timeout_ms`` from now). Either way the error names
        every address's last failure. Waiting for one address's connection (socket and
        handshake, up to ``socket_connection_setup_timeout_ms``) stops at the deadline too;
        the attempt itself goes on, for whoever asks next.
        """
        start = time.monotonic()
        if deadline is None:
            deadline = start + self.config.api_timeout_ms / 1000
        backoff = self.config.reconnect_backoff_ms / 1000
        last: dict[str, BaseException] = {}
        while True:
            # the least loaded live connection (Java's leastLoadedNode): metadata and admin
            # requests go where fewest requests wait, ties drawn at random
            alive = [c for c in self._conns.values() if c.alive]
            if alive:
                _RNG.shuffle(alive)
                return min(alive, key=lambda c: c.in_flight)
            nodes = list(self.brokers) + [-(i + 1) for i in range(len(self.config.bootstrap))]
            _RNG.shuffle(nodes)
            definite = True
            for node in nodes:
                left = deadline - time.monotonic()
                if left <= 0:
                    definite = False
                    break
                try:
                    return await asyncio.wait_for(self.connection(node), left)
                except (BrokerNotAvailableError, KafkaTimeoutError, ProtocolError, OSError,
                        asyncio.TimeoutError) as exc:
                    # wait_for's timeout (asyncio's own class before Python 3.11); a
                    # KafkaTimeoutError is a TimeoutError too, with a cause of its own: kept
                    if (isinstance(exc, (TimeoutError, asyncio.TimeoutError))
                            and not isinstance(exc, KcodecError)):
                        exc = KafkaTimeoutError(
                            f"{self.address(node)}: the connection and Kafka handshake did "
                            f"not complete within the {left:.1f} s left before the deadline; "
                            f"is a Kafka broker listening there?")
                    self.last_fail, self.last_error = time.monotonic(), exc
                    last[self.address(node)] = exc
                    definite = definite and getattr(exc, "definite", False)
            causes = "; ".join(str(e) for e in last.values())
            if not self.reached and definite:
                raise BrokerNotAvailableError(
                    f"no broker reachable: {causes}: check the bootstrap address "
                    f"(bootstrap_servers, -b) and that a broker runs there", retriable=False)
            if time.monotonic() + backoff > deadline:
                raise BrokerNotAvailableError(
                    f"no broker reachable within {time.monotonic() - start:.1f} s "
                    f"(last error: {causes or 'no address could be tried in time'}): check "
                    f"the bootstrap address (bootstrap_servers, -b) and that a broker runs there")
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.config.reconnect_backoff_max_ms / 1000)

    def address(self, node: int) -> str:
        """``host:port`` of a broker id (negative: a bootstrap address)."""
        host, port = self.config.bootstrap[-node - 1] if node < 0 else \
            self.brokers.get(broker_of(node), ("?", 0))
        return f"{host}:{port}"

    async def request(self, node_id: int | None, req: Request[R], version: int | None = None,
                      timeout: float | None = None) -> R:
        """Send ``req`` to ``node_id`` (None: any broker) and return its answer, of the
        request's response class (``type(req).RESPONSE``): the one round trip of the client.
        The API key comes from the request's class, the version from the broker's
        negotiated range unless given."""
        conn = await self._connection_for(node_id, req)
        return (await self._guard(conn.request(req, version, timeout))).body

    async def request_unanswered(self, node_id: int | None, req: Request[Any],
                                 version: int | None = None) -> None:
        """Send ``req`` expecting no answer (a Produce with acks=0)."""
        conn = await self._connection_for(node_id, req)
        await self._guard(conn.send(req, version))

    async def _connection_for(self, node_id: int | None, req: Request[Any]) -> BrokerConnection:
        check_request(req)      # before connecting: a dict of fields is no request
        return await (self.any_connection() if node_id is None else self.connection(node_id))

    async def _guard(self, sent: Awaitable[T]) -> T:
        """Await one round trip, noting when the cluster last answered or failed."""
        try:
            out = await sent
        except KcodecError as exc:
            self.last_fail, self.last_error = time.monotonic(), exc
            if getattr(exc, "after_handshake", False) and not self.last_ok:
                # a listener that wants SASL, and no broker ever answered us: waiting for
                # api_timeout_ms changes nothing
                exc.retriable = False  # type: ignore[attr-defined]
            raise
        self.last_ok = time.monotonic()
        return out

    async def call(self, make: Callable[[], Awaitable[T]], what: str,
                   deadline: float | None = None) -> T:
        """Run ``make()`` until it succeeds, retrying retriable failures with backoff.

        Retriable: disconnects, timeouts, protocol errors on one connection, and
        ``KafkaError`` with a retriable code (metadata is refreshed first when the code says
        it is stale).
        """
        if deadline is None:
            deadline = time.monotonic() + self.config.api_timeout_ms / 1000
        backoff = self.config.retry_backoff_ms / 1000
        attempts = 0
        last: BaseException | None = None
        while True:
            attempts += 1
            try:
                result = await make()
                if attempts > 1:    # a retry that succeeded late: worth an operator's eye
                    log.info("%s succeeded after %d attempts (last error: %s)", what,
                             attempts, last)
                return result
            except KafkaError as exc:
                if self.metrics is not None:
                    self.metrics.error(what, exc.code)
                if not exc.retriable or time.monotonic() + backoff > deadline:
                    raise
                if exc.code in REFRESH_CODES:
                    self.invalidate()
                last = exc
            except (BrokerNotAvailableError, KafkaTimeoutError, ProtocolError) as exc:
                if self.closed:
                    raise ClientClosedError("the client is closed") from exc
                if not getattr(exc, "retriable", True) or time.monotonic() + backoff > deadline:
                    raise
                self.invalidate()
                last = exc
            if self.metrics is not None:
                self.metrics.retry(what)
            if self.debug.protocol:
                log.debug("%s: attempt %d failed (%s), retrying in %.0f ms", what, attempts,
                          last, backoff * 1000)
            await asyncio.sleep(backoff * (0.8 + 0.4 * _RNG.random()))
            backoff = min(backoff * 2, 1.0)

    # --------------------------------------------------------------- metadata
    def invalidate(self) -> None:
        self._meta_time = 0.0

    @property
    def stale(self) -> bool:
        return time.monotonic() - self._meta_time > self.config.metadata_max_age_ms / 1000

    async def refresh(self, topics: list[str] | None = None, auto_create: bool = False) -> Any:
        """Fetch metadata (``topics`` None: every topic) and update the cache."""
        if self._meta_lock is None:
            self._meta_lock = asyncio.Lock()
        async with self._meta_lock:
            req = requests.metadata(topics, auto_create)
            body = await self.call(lambda: self.request(None, req), "metadata")
            self.brokers = {b.node_id: (b.host, b.port) for b in body.brokers}
            self.racks = {b.node_id: b.rack for b in body.brokers}
            self.cluster_id = body.cluster_id
            self.controller_id = body.controller_id
            asked = set(topics) if topics else None     # [] is every topic at v0
            for t in body.topics:
                if t.name is None:     # asked by name, answered without one: nothing to file
                    continue
                if asked is not None and t.name not in asked:
                    continue           # not asked for: a broken answer files nothing else
                tid = getattr(t, "topic_id", None)
                info = TopicInfo(t.name, t.error_code, is_internal=t.is_internal,
                                 topic_id=tid if tid is not None and tid.int else None)
                if info.topic_id is not None and t.error_code == ErrorCode.NONE:
                    self.topic_names[info.topic_id] = t.name
                for p in t.partitions:
                    info.partitions[p.partition_index] = p.leader_id
                    info.replicas[p.partition_index] = list(p.replica_nodes)
                    info.isr[p.partition_index] = list(p.isr_nodes)
                if t.error_code == ErrorCode.NONE or t.name not in self.topics:
                    self.topics[t.name] = info
                if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    self.topics.pop(t.name, None)
            for node, conn in list(self._conns.items()):
                b = broker_of(node)
                if node >= 0 and b in self.brokers and self.brokers[b] != (conn.host, conn.port):
                    conn.close()
            self._meta_time = time.monotonic()
            if self.debug.metadata:
                log.debug("metadata: %d brokers, controller %s, topics %s", len(self.brokers),
                          self.controller_id, {t.name: (t.error_code, len(t.partitions))
                                               for t in body.topics})
            return body

    async def topic(self, name: str, auto_create: bool = True,
                    deadline: float | None = None) -> TopicInfo:
        """Partitions and leaders of ``name``, waiting while the topic is being created."""
        if deadline is None:
            deadline = time.monotonic() + self.config.api_timeout_ms / 1000
        backoff = self.config.retry_backoff_ms / 1000
        while True:
            info = self.topics.get(name)
            if info is not None and info.error_code == 0 and info.partitions and not self.stale \
                    and all(lead >= 0 for lead in info.partitions.values()):
                return info
            await self.refresh([name], auto_create)
            info = self.topics.get(name)
            if info is not None and info.error_code == 0 and info.partitions \
                    and all(lead >= 0 for lead in info.partitions.values()):
                return info
            code = info.error_code if info is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if not is_retriable(code) or time.monotonic() + backoff > deadline:
                raise KafkaError(code or ErrorCode.LEADER_NOT_AVAILABLE, f"topic {name!r}")
            await asyncio.sleep(backoff)

    def by_topic_id(self, api_key: int, version: int | None,
                    topics: Iterable[str]) -> tuple[int | None, dict[str, Any] | None]:
        """KIP-516 for a Produce or Fetch to a broker that takes it up to ``version`` (None:
        not known yet, the negotiated one): (the version to send, the topics' ids). By id
        where that version names topics by id and the metadata has every topic's id; else
        by name, at most at the last version that names them (ids None)."""
        first = TOPIC_ID_VERSIONS[api_key]
        if version is not None and version < first:
            return version, None
        ids = self.topic_ids(topics)
        if ids is None:
            return (first - 1 if version is None else min(version, first - 1)), None
        return version, ids

    def topic_ids(self, names: Any) -> dict[str, Any] | None:
        """Topic ids of ``names`` (KIP-516), or None if the metadata lacks one of them:
        then requests use the last version that names topics."""
        out = {}
        for n in names:
            info = self.topics.get(n)
            if info is None or info.topic_id is None:
                return None
            out[n] = info.topic_id
        return out

    async def find_coordinator(self, key: str, key_type: int = requests.GROUP) -> int:
        """The node id of the coordinator of group (or, ``key_type`` TRANSACTION,
        transactional id) ``key``, its address remembered; ``KafkaError`` on an error code
        (one attempt: callers retry through ``call``)."""
        b = await self.request(None, requests.find_coordinator(key, key_type))
        if b.error_code:
            raise KafkaError(b.error_code, f"FindCoordinator {key!r}")
        self.brokers.setdefault(b.node_id, (b.host, b.port))
        return b.node_id

    async def leader(self, topic: str, partition: int) -> int:
        info = await self.topic(topic)
        if partition not in info.partitions:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"topic {topic!r} has no partition {partition}")
        return info.partitions[partition]

    # --------------------------------------------------------------- lifecycle
    async def _reap_idle(self) -> None:
        idle = self.config.connections_max_idle_ms / 1000
        while not self.closed:
            await asyncio.sleep(min(max(idle / 4, 0.05), 30))
            now = time.monotonic()
            for node, conn in list(self._conns.items()):
                if conn.alive and not conn.in_flight and now - conn.last_used > idle:
                    conn.close()
                    self._conns.pop(node, None)

    def connections(self) -> list[BrokerConnection]:
        return [c for c in self._conns.values() if c.alive]

    async def close(self) -> None:
        if self._telemetry is not None and not self.closed:
            if self._telemetry_task is not None:
                self._telemetry_task.cancel()
            try:                      # KIP-714: the last push says the client is going
                await asyncio.wait_for(self._telemetry.close(), 1.0)
            except (asyncio.TimeoutError, KcodecError):
                pass
        self.closed = True
        if self._reaper is not None:
            self._reaper.cancel()
        if self._stats is not None:
            self._stats.cancel()
        for task in list(self._connecting.values()):
            task.cancel()
        # every connection this client made, including those still connecting or dropped
        # from the table, so no socket outlives the client
        for conn in {*self._conns.values(), *self._made}:
            conn.close(ClientClosedError("the client is closed"))
        self._conns.clear()
        await asyncio.sleep(0)    # the transports' connection_lost runs
