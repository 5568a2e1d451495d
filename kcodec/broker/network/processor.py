"""A processor: one thread, one asyncio loop, the connections the acceptor gave it.

Per connection it loops: read ``int32 size``; check the size against the frame limit (a bigger
or negative size closes the connection before anything is allocated); wait while the request
channel's byte budget has no room for the frame; read it; parse the three fixed header fields
(api key, version, correlation id); queue the request; await its answer; write it. Reading the
next request only after the previous one is answered keeps responses in request order and at
most one request per connection in flight, as Kafka's broker does (it mutes the channel).

Each connection has a :class:`ConnectionState` that handlers can read and extend (the client
address, an ``authenticated`` flag and free-form ``attrs``: an authentication step before
dispatch hangs off this).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kcodec.broker.network.channel import CLOSE, NO_RESPONSE, Request, RequestChannel

__all__ = ["Processor", "ConnectionState"]

log = logging.getLogger("kcodec.broker")
_ids = itertools.count(1)


@dataclass
class ConnectionState:
    """What the broker knows about one client connection."""

    id: int
    node_id: int
    peer: str
    listener: str | None = None         # the listener (name) the connection came through
    authenticated: bool = True          # no authentication yet: every connection is trusted
    client_id: str | None = None
    requests: int = 0
    last_active: float = 0.0           # monotonic time of the last frame read or answer sent
    busy: bool = False                 # a request is being processed
    attrs: dict[str, Any] = field(default_factory=dict)
    writer: Any = None

    def close(self) -> None:
        w = self.writer
        if w is not None:
            w.transport.abort()


class Processor:
    def __init__(self, node_id: int, index: int, channel: RequestChannel, *,
                 max_request_bytes: int, idle_timeout_s: float, security: Any = None,
                 listener: str | None = None) -> None:
        self.node_id = node_id
        self.security = security
        self.listener = listener
        self.index = index
        self.channel = channel
        self.max_request_bytes = max_request_bytes
        self.idle_timeout_s = idle_timeout_s
        self.connections: dict[int, ConnectionState] = {}
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=f"kcodec-broker-{node_id}-proc-{index}",
                                        daemon=True)
        self._tasks: set[asyncio.Task] = set()

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
        """Close connections idle (no request, no answer pending) for idle_timeout_s."""
        now = time.monotonic()
        for c in list(self.connections.values()):
            if not c.busy and now - c.last_active > self.idle_timeout_s:
                log.info("kcodec broker: closing idle connection %s", c.peer)
                c.close()
        self.loop.call_later(min(1.0, self.idle_timeout_s / 2), self._sweep)

    def assign(self, sock: socket.socket) -> None:
        """Called by the acceptor thread: take over a connected socket."""
        self.loop.call_soon_threadsafe(self._spawn, sock)

    def _spawn(self, sock: socket.socket) -> None:
        task = self.loop.create_task(self._serve(sock))
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

    async def _serve(self, sock: socket.socket) -> None:
        sec = self.security
        try:
            if sec is not None and sec.ssl_context is not None:
                reader, writer = await _tls_streams(sock, sec.ssl_context)
            else:
                reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 20)
        except (OSError, asyncio.TimeoutError):   # ssl.SSLError is an OSError
            sock.close()
            return
        try:
            peer = "{}:{}".format(*writer.get_extra_info("peername")[:2])
        except Exception:
            peer = "?"
        conn = ConnectionState(next(_ids), self.node_id, peer, self.listener, writer=writer,
                               last_active=time.monotonic())
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

    async def _loop(self, conn: ConnectionState, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> None:
        channel = self.channel
        while True:
            head = await reader.readexactly(4)
            size = int.from_bytes(head, "big", signed=True)
            if size < 8 or size > self.max_request_bytes:
                log.info("kcodec broker: closing %s: request size %d outside 8..%d",
                         conn.peer, size, self.max_request_bytes)
                return
            while not channel.reserve(size):   # the global budget: wait before reading
                await asyncio.sleep(0.002)
            try:
                frame = await reader.readexactly(size)   # a peer stalling mid-frame goes idle
            except BaseException:
                channel.release(size)
                raise
            gate = conn.attrs.get("sasl")
            if gate is not None:
                try:
                    answer, close = gate.on_request(
                        int.from_bytes(frame[0:2], "big", signed=True),
                        int.from_bytes(frame[2:4], "big", signed=True), frame)
                except BaseException:
                    channel.release(size)
                    raise
                if answer is not None or close:
                    channel.release(size)
                if answer is not None:
                    writer.write(answer)
                    await writer.drain()
                conn.authenticated = gate.principal is not None and not close
                if close:
                    return
                if answer is not None:
                    conn.last_active = time.monotonic()
                    continue
                conn.attrs["principal"] = gate.principal
            conn.busy = True
            req = Request(self.node_id, conn, int.from_bytes(frame[0:2], "big", signed=True),
                          int.from_bytes(frame[2:4], "big", signed=True),
                          int.from_bytes(frame[4:8], "big", signed=True), frame)
            conn.requests += 1
            channel.put(req)
            try:
                answer = await asyncio.wrap_future(req.future)
            finally:
                channel.release(size)
            if answer is CLOSE or answer == CLOSE:
                return
            if answer is not NO_RESPONSE and answer != NO_RESPONSE:
                writer.write(answer)
                await writer.drain()
            conn.busy = False
            conn.last_active = time.monotonic()


async def _tls_streams(sock: socket.socket, ctx: Any) -> tuple[asyncio.StreamReader,
                                                               asyncio.StreamWriter]:
    """Server-side TLS on an accepted socket (the handshake included), as asyncio streams."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20, loop=loop)
    protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
    transport, _ = await loop.connect_accepted_socket(lambda: protocol, sock=sock, ssl=ctx,
                                                      ssl_handshake_timeout=10.0)
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)
