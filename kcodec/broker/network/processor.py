"""A processor: one thread, one asyncio loop, the connections the acceptor gave it.

Per connection it loops: read ``int32 size``; check the size against the frame limit (a bigger
or negative size closes the connection before anything is allocated): ``max_request_bytes``
(Kafka's ``socket.request.max.bytes``), and before a SASL connection has authenticated
``max_unauthenticated_bytes`` (Kafka's ``sasl.server.max.receive.size``, 512 KiB); read the
body, booking its bytes against the request channel's budget as they arrive (never the size
the client declared, so a client that announces a large frame and stalls holds up nobody);
parse the three fixed header fields (api key, version, correlation id); queue the request;
await its answer; write it. Reading the next request only after the previous one is
answered keeps responses in request order and at most one request per connection in
flight, as Kafka's broker does (it mutes the channel): a connection holds at most one frame
in memory.

The answers of requests a client sent ahead (pipelined: the next frames already read) leave
together: an answer is held until the connection's task waits for more bytes or for a
delayed answer (a callback of the loop's next turn), or until ``ANSWERS_AT_ONCE`` answers or
``ANSWER_BYTES_AT_ONCE`` bytes are held, and then all are written at once. One send and one
wake-up of the client for several answers: 250 pre-encoded Produce requests sent back to
back took 148 ms a round with a send per answer, 130 with the answers held (medians of 12
rounds, alternating). An answer to a client that waits for it leaves at the loop's next
turn, once the connection's task has yielded.

A small Produce or Fetch (under the channel's large-request size) is not queued: the
processor runs it itself (``inline``, set by the node), since handing it to a handler
thread and its answer back took ~40% of a small produce's time in the broker (two thread
switches and the loop's self-pipe); what it must wait for (a long-polling fetch, acks=all
on followers) is a future, as from a handler.

Before SASL authentication a frame bigger than ``PREAUTH_LARGE_BYTES`` (64 KiB; no real
client's login needs one) is read only when one of ``PREAUTH_LARGE_AT_ONCE`` turns per
processor is free, and holds it until answered: floods of big pre-login frames take turns
among themselves while small frames, every real login among them, never wait.

A body must arrive within ``read_timeout_s`` of its size (time spent waiting for the budget
not counted), else the connection is closed; the sweep that closes idle connections checks it
about once a second.

Each connection has a :class:`ConnectionState` that handlers can read and extend (the client
address, the principal, an ``authenticated`` flag and free-form ``attrs``). A failed SASL
authentication is logged (peer, listener, mechanism, user name; never a secret) and answered
only after ``failed_auth_delay_s`` (Kafka's ``connection.failed.authentication.delay.ms``),
without blocking the processor's other connections. A failed TLS handshake (plaintext on a
TLS port, an untrusted certificate, a refused protocol version, no handshake within
``TLS_HANDSHAKE_TIMEOUT_S``) is logged at WARNING on ``kcodec.broker.security`` with the peer
and the reason.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kcodec.broker.network.channel import (
    CLOSE,
    INLINE_APIS,
    NO_RESPONSE,
    QUEUE,
    Request,
    RequestChannel,
)
from kcodec.broker.network.handlers import chain, run_handler

__all__ = ["Processor", "ConnectionState", "ANONYMOUS", "MAX_UNAUTHENTICATED_BYTES"]

log = logging.getLogger(__name__)
security_log = logging.getLogger("kcodec.broker.security")
_ids = itertools.count(1)

ANONYMOUS = "User:ANONYMOUS"               # the principal of a connection nobody vouched for
MAX_UNAUTHENTICATED_BYTES = 512 * 1024     # Kafka's sasl.server.max.receive.size default
READ_PIECE = 1 << 20                       # a frame's body is read and booked in such pieces
TLS_HANDSHAKE_TIMEOUT_S = 10.0             # a TLS client must finish its handshake within it
PREAUTH_LARGE_BYTES = 64 * 1024            # a frame before login bigger than this ...
PREAUTH_LARGE_AT_ONCE = 2                  # ... is read and handled so many at a time
ANSWERS_AT_ONCE = 16                       # answers held for one write at most ...
ANSWER_BYTES_AT_ONCE = 256 * 1024          # ... and bytes of them


@dataclass
class ConnectionState:
    """What the broker knows about one client connection."""

    id: int
    node_id: int
    peer: str                           # "host:port" of the client
    listener: str | None = None         # the listener (name) the connection came through
    authenticated: bool = True          # no authentication yet: every connection is trusted
    client_id: str | None = None
    requests: int = 0
    last_active: float = 0.0           # monotonic time of the last frame read or answer sent
    busy: bool = False                 # a request is being processed
    attrs: dict[str, Any] = field(default_factory=dict)
    writer: Any = None
    host: str = ""                     # the client's address (what ACL hosts match)
    principal: str = ANONYMOUS         # "User:alice" once SASL or a TLS certificate says so
    reading_since: float | None = None  # monotonic time a frame's size arrived, until its body
    throttle_s: float = 0.0            # a quota's throttle: read nothing more for this long
    throttle_first: bool = False       # ... and hold the answer back that long (old versions)
    counted_user: str | None = None    # the principal its connection is counted for

    @property
    def owner(self) -> str:
        """Whose requests these are, for the request channel's per-owner share of its budget
        and the turns of its large-request lane: the principal once SASL or a certificate
        named one, else the client's address (a connection nobody vouched for is known only
        by it; one key per connection would let a host take a share per connection)."""
        return self.principal if self.principal != ANONYMOUS else "host:" + self.host

    def close(self) -> None:
        w = self.writer
        if w is not None:
            w.transport.abort()


class Processor:
    def __init__(self, node_id: int, index: int, channel: RequestChannel, *,
                 max_request_bytes: int, idle_timeout_s: float, security: Any = None,
                 listener: str | None = None,
                 max_unauthenticated_bytes: int = MAX_UNAUTHENTICATED_BYTES,
                 read_timeout_s: float = 30.0, failed_auth_delay_s: float = 0.1,
                 on_close: Callable[[str], None] | None = None,
                 quotas: Any = None) -> None:
        self.node_id = node_id
        self.quotas = quotas                # ConnectionQuotas: max.connections.per.user
        self.security = security
        self.listener = listener
        self.index = index
        self.channel = channel
        self.max_request_bytes = max_request_bytes
        self.max_unauthenticated_bytes = max_unauthenticated_bytes
        self.idle_timeout_s = idle_timeout_s
        self.read_timeout_s = read_timeout_s
        self.failed_auth_delay_s = failed_auth_delay_s
        self.on_close = on_close            # told each connection's host when it ends
        self.connections: dict[int, ConnectionState] = {}
        # handle(request) -> the answer (or a future of it), or QUEUE: it goes to the
        # handler threads after all; None: every request does (the node sets it)
        self.inline: Callable[[Request], Any] | None = None
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=f"kcodec-broker-{node_id}-proc-{index}",
                                        daemon=True)
        self._tasks: set[asyncio.Task] = set()
        self._preauth_large = asyncio.Semaphore(PREAUTH_LARGE_AT_ONCE)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._sweep)
        self.loop.run_forever()
        # closing: cancel what is left, then close the loop
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            self.loop.run_until_complete(asyncio.gather(*self._tasks, return_exceptions=True))
        self.loop.close()

    def _sweep(self) -> None:
        """Close connections idle (no request, no answer pending) for idle_timeout_s, and
        those whose frame has not arrived read_timeout_s after its size."""
        now = time.monotonic()
        for c in list(self.connections.values()):
            if c.reading_since is not None and now - c.reading_since > self.read_timeout_s:
                log.info("kcodec broker: closing %s on %s: a request's body did not arrive "
                         "within %.0f s of its size", c.peer, c.listener, self.read_timeout_s)
                c.close()
            elif not c.busy and now - c.last_active > self.idle_timeout_s:
                log.info("kcodec broker: closing idle connection %s", c.peer)
                c.close()
        self.loop.call_later(min(1.0, self.idle_timeout_s / 2, self.read_timeout_s / 2),
                             self._sweep)

    def assign(self, sock: socket.socket, host: str = "") -> None:
        """Called by the acceptor thread: take over a connected socket."""
        self.loop.call_soon_threadsafe(self._spawn, sock, host)

    def _spawn(self, sock: socket.socket, host: str = "") -> None:
        task = self.loop.create_task(self._serve(sock, host))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def close_all(self) -> None:
        """Drop every connection (a node stop); thread-safe."""
        def _abort() -> None:
            for c in list(self.connections.values()):
                c.close()
        self.loop.call_soon_threadsafe(_abort)

    def stop(self) -> None:
        self.close_all()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)

    async def _serve(self, sock: socket.socket, host: str = "") -> None:
        try:
            await self._serve_connection(sock)
        finally:
            if self.on_close is not None:
                self.on_close(host)

    async def _serve_connection(self, sock: socket.socket) -> None:
        sec = self.security
        tls = sec is not None and sec.ssl_context is not None
        peer_addr, started = _peer_of(sock), time.monotonic()
        try:
            if tls:
                reader, writer = await _tls_streams(sock, sec.ssl_context)
            else:
                reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 20)
        except (OSError, asyncio.TimeoutError) as exc:   # ssl.SSLError is an OSError
            if tls:
                security_log.warning("kcodec broker: failed TLS handshake from %s on %s: %s",
                                     peer_addr, self.listener,
                                     _tls_reason(exc, time.monotonic() - started))
            sock.close()
            return
        try:
            addr = writer.get_extra_info("peername")[:2]
            peer = "{}:{}".format(*addr)
        except Exception:
            addr, peer = ("?", 0), "?"
        conn = ConnectionState(next(_ids), self.node_id, peer, self.listener, writer=writer,
                               last_active=time.monotonic(), host=str(addr[0]))
        ssl_object = writer.get_extra_info("ssl_object")
        if ssl_object is not None:                # TLS: the certificate's subject, if any
            from kcodec.broker.security.principal import NoMatchingRule
            from kcodec.broker.security.tls import peer_principal

            try:
                conn.principal = "User:" + peer_principal(ssl_object, sec.principal_mapper)
            except NoMatchingRule as exc:      # Kafka refuses such a client: so do we
                security_log.warning("kcodec broker: refused TLS client %s on %s: %s", peer,
                                     self.listener, exc)
                writer.transport.abort()
                return
            if not self._admit_user(conn, conn.principal):
                writer.transport.abort()
                return
        gate = sec.gate() if sec is not None else None
        if gate is not None:      # SASL: only ApiVersions and the SASL APIs until authenticated
            conn.authenticated = False
            conn.attrs["sasl"] = gate
        self.connections[conn.id] = conn
        try:
            await self._loop(conn, reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.TimeoutError, OSError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:   # pragma: no cover - a bug: keep serving the others
            log.exception("kcodec broker: connection %s failed", peer)
        finally:
            self.connections.pop(conn.id, None)
            writer.transport.abort()
            if conn.counted_user is not None and self.quotas is not None:
                self.quotas.release_user(conn.counted_user)

    def _admit_user(self, conn: ConnectionState, principal: str) -> bool:
        """Count the connection as ``principal``'s (max.connections.per.user), once; False
        (logged) past the limit. ANONYMOUS is not counted: the address limits bound it."""
        quotas = self.quotas
        if quotas is None or conn.counted_user is not None or principal == ANONYMOUS:
            return True
        why = quotas.admit_user(principal)
        if why is not None:
            count = quotas.should_log(principal)
            if count is not None:
                more = f" ({count} refused since the last such line)" if count > 1 else ""
                security_log.warning("kcodec broker: refused a connection from %s on %s: %s%s",
                                     conn.peer, conn.listener, why, more)
            return False
        conn.counted_user = principal
        return True

    async def _read_frame(self, conn: ConnectionState, reader: asyncio.StreamReader,
                          size: int, owner: str) -> bytes:
        """The ``size`` bytes of a frame's body, booked against the channel's budget as they
        arrive, as ``owner``'s (a failure gives back what was booked)."""
        channel = self.channel
        chunks: list[bytes] = []
        got = 0
        conn.reading_since = time.monotonic()
        try:
            while got < size:
                # a piece of at most READ_PIECE, booked once it is all here: one await for
                # a frame up to that size (readexactly grows one buffer), and what a
                # connection holds unbooked is at most one piece
                chunk = await reader.readexactly(min(size - got, READ_PIECE))
                if not channel.book(len(chunk), owner):
                    # the budget is full of requests waiting for an answer: wait without
                    # reading more (the wait does not count against the read timeout)
                    started, conn.reading_since = conn.reading_since, None
                    paused = time.monotonic()
                    while not channel.book(len(chunk), owner):
                        await asyncio.sleep(0.002)
                    conn.reading_since = (started or paused) + time.monotonic() - paused
                got += len(chunk)
                chunks.append(chunk)
        except BaseException:
            channel.release(got, owner)
            raise
        finally:
            conn.reading_since = None
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def _loop(self, conn: ConnectionState, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> None:
        held = [False]        # a turn of the big-frames-before-login semaphore
        answers = _Answers(writer, self.loop)
        try:
            await self._serve_requests(conn, reader, writer, held, answers)
        finally:
            answers.flush()       # before the connection ends: a closing client may read on
            if held[0]:
                self._preauth_large.release()

    async def _serve_requests(self, conn: ConnectionState, reader: asyncio.StreamReader,
                              writer: asyncio.StreamWriter, held: list[bool],
                              answers: _Answers) -> None:
        channel = self.channel
        while True:
            if held[0]:               # the last big frame before login is answered
                held[0] = False
                self._preauth_large.release()
            head = await reader.readexactly(4)
            size = int.from_bytes(head, "big", signed=True)
            limit = self.max_request_bytes
            if not conn.authenticated:
                limit = min(limit, self.max_unauthenticated_bytes)
            if size < 8 or size > limit:
                log.info("kcodec broker: closing %s on %s: request size %d outside 8..%d%s",
                         conn.peer, conn.listener, size, limit,
                         "" if conn.authenticated else " (before authentication)")
                return
            if not conn.authenticated and size > PREAUTH_LARGE_BYTES:
                # big frames before login (no real client sends one) take turns, a few per
                # processor, read only once their turn comes: a flood of them costs the
                # others nothing, small ones (every real login) never wait
                await self._preauth_large.acquire()
                held[0] = True
            owner = conn.owner           # (a login changes it: its bytes go back as booked)
            frame = await self._read_frame(conn, reader, size, owner)
            gate = conn.attrs.get("sasl")
            if gate is not None:
                api_key = int.from_bytes(frame[0:2], "big", signed=True)
                try:
                    answer, close = gate.on_request(
                        api_key, int.from_bytes(frame[2:4], "big", signed=True), frame)
                except BaseException:
                    channel.release(size, owner)
                    raise
                if answer is not None or close:
                    channel.release(size, owner)
                    answers.flush()                 # what was answered before goes first
                    if close:
                        conn.authenticated = False
                        await self._refuse(conn, gate, api_key, answer, writer)
                        return
                    if (gate.principal is not None
                            and not self._admit_user(conn, "User:" + gate.principal)):
                        return       # past max.connections.per.user: closed, not answered
                    if answer is not None:
                        writer.write(answer)
                        await writer.drain()
                    if gate.principal is not None:
                        conn.authenticated = True
                        conn.principal = "User:" + gate.principal
                    conn.last_active = time.monotonic()
                    continue
                conn.authenticated = gate.principal is not None
            conn.busy = True
            req: Request[Any] = Request(self.node_id, conn, int.from_bytes(frame[0:2], "big", signed=True),
                          int.from_bytes(frame[2:4], "big", signed=True),
                          int.from_bytes(frame[4:8], "big", signed=True), frame, owner=owner)
            conn.requests += 1
            channel.admit(req)
            try:
                answer = QUEUE
                if (self.inline is not None and req.api_key in INLINE_APIS
                        and not channel.is_large(req)):
                    answer = run_handler(self.inline, req)
                    if isinstance(answer, concurrent.futures.Future):
                        chain(answer, req.future)
                        answer = await asyncio.wrap_future(req.future)
                if answer is QUEUE:
                    channel.enqueue(req)
                    answer = await asyncio.wrap_future(req.future)
            finally:
                channel.done(req)
            if answer is CLOSE or answer == CLOSE:
                return
            throttle, conn.throttle_s = conn.throttle_s, 0.0
            if throttle and conn.throttle_first:
                await asyncio.sleep(throttle)     # as Kafka before KIP-219: a late answer
                throttle = 0.0
            if answer is not NO_RESPONSE and answer != NO_RESPONSE:
                answers.send(answer)
                await writer.drain()
            if throttle:
                await asyncio.sleep(throttle)     # the channel is muted (KIP-219)
            conn.busy = False
            conn.last_active = time.monotonic()

    async def _refuse(self, conn: ConnectionState, gate: Any, api_key: int,
                      answer: bytes | None, writer: asyncio.StreamWriter) -> None:
        """End a connection that failed to authenticate: log why (never a secret), and send
        the failure answer after the delay, as Kafka does, then close."""
        failure = getattr(gate, "failure", None)
        if answer is None:
            log.info("kcodec broker: closing %s on %s: API %d before authentication",
                     conn.peer, conn.listener, api_key)
            return
        security_log.warning("kcodec broker: failed authentication from %s on listener %s: %s",
                             conn.peer, conn.listener, failure or "SASL exchange refused")
        if self.failed_auth_delay_s > 0:
            await asyncio.sleep(self.failed_auth_delay_s)   # this connection only
        writer.write(answer)
        await writer.drain()


class _Answers:
    """A connection's answers on their way out, in request order: held until the loop's
    next turn (the connection's task has then yielded: no more frames were ready) or until
    enough are held, then written with one call."""

    __slots__ = ("_writer", "_loop", "_held", "_bytes")

    def __init__(self, writer: asyncio.StreamWriter, loop: asyncio.AbstractEventLoop) -> None:
        self._writer = writer
        self._loop = loop
        self._held: list[bytes] = []
        self._bytes = 0

    def send(self, data: bytes) -> None:
        if not self._held:
            self._loop.call_soon(self.flush)
        self._held.append(data)
        self._bytes += len(data)
        if len(self._held) >= ANSWERS_AT_ONCE or self._bytes >= ANSWER_BYTES_AT_ONCE:
            self.flush()

    def flush(self) -> None:
        """Write what is held (a no-op when nothing is)."""
        if self._held:
            held, self._held, self._bytes = self._held, [], 0
            self._writer.writelines(held)


def _peer_of(sock: socket.socket) -> str:
    try:
        return "{}:{}".format(*sock.getpeername()[:2])
    except OSError:
        return "?"


def _tls_reason(exc: BaseException, took: float) -> str:
    """Why a handshake failed, in a few words (the client's bytes are never quoted)."""
    if (isinstance(exc, (asyncio.TimeoutError, TimeoutError, ConnectionAbortedError))
            and took >= TLS_HANDSHAKE_TIMEOUT_S):
        return f"no handshake within {TLS_HANDSHAKE_TIMEOUT_S:g} s"
    reason = getattr(exc, "reason", None)
    if isinstance(exc, ssl.SSLError) and reason:
        return f"{reason} ({getattr(exc, 'library', None) or 'SSL'})"
    if isinstance(exc, ConnectionError):
        return "the client closed the connection during the handshake"
    strerror = getattr(exc, "strerror", None)
    return type(exc).__name__ + (f": {strerror}" if strerror else "")


async def _tls_streams(sock: socket.socket, ctx: Any) -> tuple[asyncio.StreamReader,
                                                               asyncio.StreamWriter]:
    """Server-side TLS on an accepted socket (the handshake included), as asyncio streams."""
    loop = asyncio.get_running_loop()
    timeout = TLS_HANDSHAKE_TIMEOUT_S
    reader = asyncio.StreamReader(limit=1 << 20, loop=loop)
    protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
    transport, _ = await loop.connect_accepted_socket(lambda: protocol, sock=sock, ssl=ctx,
                                                      ssl_handshake_timeout=timeout)
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)
