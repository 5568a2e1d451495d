"""asyncio I/O driver: one ``BrokerConnection`` per broker runs the sans-I/O core on a socket.

The socket's bytes are parsed where the loop hands them over, in the protocol's
``data_received``: an answer's future is set in the same turn its last bytes were read,
and its requester resumes in the next. A StreamReader and a task reading it took one turn
more on every answer (the reader's wake-up, then the requester's) and copied each read out
of the reader's buffer.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import ssl
import time
from typing import TYPE_CHECKING, Any, TypeVar

from kcodec.client.errors import BrokerNotAvailableError, KafkaTimeoutError, ResponseTooLargeError
from kcodec.client.net.core import MAX_FRAME, Connection, Response
from kcodec.client.net.wire import api_name as _api_name
from kcodec.client.net.wire import check_request
from kcodec.errors import KcodecError, ProtocolError
from kcodec.observe.log import describe, get_logger
from kcodec.protocol import ApiKey
from kcodec.protocol import Request as RequestBody
from kcodec.protocol import Response as ResponseBody

if TYPE_CHECKING:
    from kcodec.client.metrics import ClientMetrics
    from kcodec.client.net.security import Security
    from kcodec.observe.log import Debug

__all__ = ["BrokerConnection"]

log = get_logger(__name__)
R = TypeVar("R", bound=ResponseBody)
_perf = time.perf_counter

# connect() errors no amount of waiting changes for a broker that was never reached
_DEFINITE_ERRNOS = {errno.ECONNREFUSED, errno.EADDRNOTAVAIL, errno.ENETUNREACH,
                    errno.EHOSTUNREACH, errno.EAFNOSUPPORT, errno.EINVAL}


def _expire(fut: asyncio.Future) -> None:
    """A request's timeout: its answer did not come (see BrokerConnection._send)."""
    if not fut.done():
        fut.set_exception(asyncio.TimeoutError())


def _definite(message: str) -> BrokerNotAvailableError:
    err = BrokerNotAvailableError(message)
    err.definite = True
    return err


class _Flow:
    """The transport's write flow control: ``drain`` waits while it is paused."""

    def __init__(self) -> None:
        self.paused = False
        self.lost = False
        self.waiters: list[asyncio.Future[None]] = []

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        self._release(None)

    def end(self, exc: BaseException) -> None:
        self.lost = True
        self._release(exc)

    def _release(self, exc: BaseException | None) -> None:
        waiters, self.waiters = self.waiters, []
        for w in waiters:
            if not w.done():
                if exc is None:
                    w.set_result(None)
                else:
                    w.set_exception(exc)
                    w.exception()

    async def drain(self) -> None:
        """Wait while the transport's write buffer is over its high-water mark."""
        if self.lost:
            raise ConnectionResetError("connection lost")
        if not self.paused:
            return
        w: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append(w)
        await w


class BrokerConnection(asyncio.Protocol):
    """A connected, version-negotiated connection; ``request`` awaits the decoded response.
    It is its socket's asyncio protocol (see the module docstring)."""

    def __init__(self, host: str, port: int, node_id: int, client_id: str | None,
                 request_timeout: float, security: Security | None = None,
                 max_frame: int = MAX_FRAME, metrics: ClientMetrics | None = None,
                 debug: Debug | None = None) -> None:
        self.host, self.port, self.node_id = host, port, node_id
        self.cm = metrics
        self.m = metrics.node(node_id) if metrics is not None else None
        self.debug = debug
        self.security = security
        self._reauth_at: float | None = None
        self._auth_lock: asyncio.Lock | None = None
        self.core = Connection(client_id, max_frame)
        self.request_timeout = request_timeout
        self._flow = _Flow()
        self._transport: asyncio.Transport | None = None
        self._pending: dict[int, asyncio.Future[Response[Any]]] = {}
        self.error: BaseException | None = None
        self.last_used = time.monotonic()
        self.answered = 0     # responses after the handshake

    def __repr__(self) -> str:
        return f"<BrokerConnection node {self.node_id} {self.host}:{self.port}>"

    @property
    def in_flight(self) -> int:
        """Requests sent on this connection and not answered yet."""
        return len(self._pending)

    @property
    def alive(self) -> bool:
        return self._transport is not None and self.error is None and not self.core.closed

    async def connect(self, timeout: float) -> BrokerConnection:
        """Open the socket and negotiate versions, within ``timeout`` seconds.

        Failures are ``BrokerNotAvailableError`` naming the address and the cause; those
        that waiting cannot change (refused, no such host, a peer that does not speak
        Kafka) carry ``definite=True`` so a client that never reached a broker can stop.
        """
        addr = f"{self.host}:{self.port}"
        sec = self.security
        tls: dict[str, Any] = {} if sec is None or sec.ssl_context is None else {
            "ssl": sec.ssl_context, "server_hostname": self.host}
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(
                loop.create_connection(lambda: self, self.host, self.port, **tls),
                timeout)
        except ssl.SSLError as exc:
            from kcodec.client.net.security import tls_error
            raise tls_error(self.host, self.port, exc) from None
        except asyncio.TimeoutError:
            raise BrokerNotAvailableError(
                f"connecting to {addr} timed out after {timeout:.1f} s") from None
        except socket.gaierror as exc:
            raise _definite(f"cannot resolve host {self.host!r}: {exc.strerror or exc}") from None
        except OSError as exc:
            why = os.strerror(exc.errno) if exc.errno else str(exc)
            err = BrokerNotAvailableError(f"cannot connect to {addr}: {why}")
            if isinstance(exc, ConnectionRefusedError) or exc.errno in _DEFINITE_ERRNOS:
                err.definite = True
            raise err from None
        try:
            resp = await self.request(self.core.handshake_request(3), 3, timeout)
            if not self.core.on_api_versions(resp):
                retry = self.core.api_versions_retry_version(resp)
                resp = await self.request(self.core.handshake_request(retry), retry, timeout)
                self.core.on_api_versions(resp)
        except KafkaTimeoutError:
            self.close()
            raise BrokerNotAvailableError(
                f"{addr} accepted the connection but did not answer the Kafka handshake "
                f"(ApiVersions) within {timeout:.1f} s; is it a Kafka broker?") from None
        except ProtocolError as exc:
            self.close()
            raise _definite(f"{addr} is not a Kafka broker: its answer to the Kafka handshake "
                            f"(ApiVersions) does not parse ({exc})") from None
        except BrokerNotAvailableError as exc:
            self.close()
            hint = "" if sec is not None and sec.use_tls else \
                " If the listener requires TLS, security_protocol must be SSL or SASL_SSL."
            raise _definite(f"{addr} closed the connection during the Kafka handshake "
                            f"(ApiVersions); is it a Kafka listener? ({exc}){hint}") from None
        except BaseException:
            self.close()
            raise
        if sec is not None and sec.use_sasl:
            try:
                await self._authenticate(timeout)
            except BaseException:
                self.close()
                raise
        if self.cm is not None:
            self.cm.conn_created.value += 1
            self.cm.in_flight(self.node_id, lambda: len(self._pending))
        log.info("connected to %s (node %s)%s", addr, self.node_id,
                 "" if sec is None else f" with {sec!r}")
        return self

    async def _authenticate(self, timeout: float | None = None) -> None:
        """SASL on this connection (at connect, and again when the session ends: KIP-368)."""
        assert self.security is not None

        async def send(req: RequestBody[R], version: int) -> Response[R]:
            return await self.request(req, version, timeout, _auth=True)
        self._reauth_at = await self.security.authenticate(
            send, self.core.broker_versions, f"{self.host}:{self.port}")

    async def _reauthenticate(self) -> None:
        if self._auth_lock is None:
            self._auth_lock = asyncio.Lock()
        async with self._auth_lock:
            if self._reauth_at is not None and time.monotonic() >= self._reauth_at:
                try:
                    await self._authenticate()
                except BaseException as exc:
                    self.close(exc if isinstance(exc, KcodecError) else None)
                    raise

    async def request(self, req: RequestBody[R], version: int | None = None,
                      timeout: float | None = None, _auth: bool = False) -> Response[R]:
        """Send ``req`` (the API key is its class's) and await its answer, of the request's
        response class."""
        resp = await self._send(req, version, timeout, True, _auth)
        assert resp is not None     # an answer was awaited: it came, or _send raised
        return resp

    async def send(self, req: RequestBody[Any], version: int | None = None) -> None:
        """Send ``req`` expecting no answer (a Produce with acks=0)."""
        await self._send(req, version, None, False, False)

    async def _send(self, req: RequestBody[Any], version: int | None, timeout: float | None,
                    expect_response: bool, auth: bool) -> Response[Any] | None:
        check_request(req)
        if not auth and (self._reauth_at is not None and time.monotonic() >= self._reauth_at
                         or self._auth_lock is not None and self._auth_lock.locked()):
            await self._reauthenticate()
        if not self.alive:
            raise self.error or BrokerNotAvailableError(f"connection to {self.host}:{self.port} is closed")
        cid, data = self.core.request(req, version, expect_response)
        api_key = req.API_KEY
        self.last_used = time.monotonic()
        transport, flow = self._transport, self._flow
        assert transport is not None
        fut: asyncio.Future[Response[Any]] = asyncio.get_running_loop().create_future()
        if expect_response:
            self._pending[cid] = fut
        transport.write(data)
        m = self.m
        if m is not None:
            m.sent(len(data))
            t0 = _perf()
        dbg = self.debug
        if dbg is not None and dbg.protocol:
            log.debug("-> node %s %s v%s cid %s (%d bytes): %s", self.node_id,
                      _api_name(api_key), self.core.last_version() if expect_response and
                      self.core.in_flight else version, cid, len(data), describe(req))
        if not expect_response:
            await flow.drain()
            return None
        try:
            if transport.get_write_buffer_size() > 1 << 20:
                await flow.drain()
            # the answer's future itself, its timeout a timer that fails it: the reader's
            # set_result resumes this task in the next turn of the loop, where
            # wait_for(shield(fut)) took three (shield's callback, wait_for's, the task's),
            # each a turn in which another thread or task can get in ahead, on every request
            # (a Produce's acknowledgement, each Fetch). If this task is cancelled the future
            # is too; the reader skips an answer whose future is done, as close() does.
            timer = asyncio.get_running_loop().call_later(
                timeout or self.request_timeout, _expire, fut)
            try:
                resp = await fut
            finally:
                timer.cancel()
            if m is not None:
                m.answered(api_key, (_perf() - t0) * 1000, resp.body)
            if dbg is not None and dbg.protocol:
                log.debug("<- node %s %s v%s cid %s: %s", self.node_id, _api_name(api_key),
                          resp.version, cid, describe(resp.body))
            return resp
        except asyncio.TimeoutError:
            # responses come in order: a lost one poisons the connection
            err = KafkaTimeoutError(
                f"{_api_name(api_key)} request to {self.host}:{self.port} timed out after "
                f"{timeout or self.request_timeout:.1f} s")
            self.close(err)
            raise err from None
        except (ConnectionError, OSError) as exc:
            if isinstance(exc, KcodecError):   # the read loop's own error: already named
                self.close(exc)
                raise
            lost = BrokerNotAvailableError(f"connection to {self.host}:{self.port} lost: {exc}")
            self.close(lost)
            raise lost from None

    # ------------------------------------------------------------ the asyncio protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # kept at once: reading starts before create_connection returns
        self._transport = transport  # type: ignore[assignment]

    def pause_writing(self) -> None:
        self._flow.pause()

    def resume_writing(self) -> None:
        self._flow.resume()

    def eof_received(self) -> bool | None:
        self._eof()
        return None       # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost(exc)
        self._flow.end(exc or ConnectionResetError("connection lost"))

    def data_received(self, data: bytes) -> None:
        """Bytes read from the socket: every answer they complete sets its request's
        future; a frame that breaks the protocol closes the connection with why."""
        if self.error is not None:
            return
        try:
            if self.m is not None:
                self.m.received(len(data))
            for r in self.core.receive(data):
                if r.api_key != ApiKey.API_VERSIONS:
                    self.answered += 1
                fut = self._pending.pop(r.correlation_id, None)
                if fut is not None and not fut.done():
                    fut.set_result(r)
        except ResponseTooLargeError as exc:
            self.close(ResponseTooLargeError(f"{self.host}:{self.port}", exc.size, exc.limit))
        except ProtocolError as exc:
            self.close(ProtocolError(f"{self.host}:{self.port}: {exc}"))
        except (OSError, KcodecError) as exc:
            if not isinstance(exc, KcodecError):
                exc = BrokerNotAvailableError(f"connection to {self.host}:{self.port} lost: {exc}")
            self.close(exc)

    def _eof(self) -> None:
        if self.error is None:
            try:
                self.core.eof()      # a frame cut short is a protocol error
            except ProtocolError as exc:
                self.close(ProtocolError(f"{self.host}:{self.port}: {exc}"))
                return
            self.close(self._closed_by_peer())

    def _lost(self, exc: Exception | None) -> None:
        if self.error is None:
            self.close(self._closed_by_peer() if exc is None else BrokerNotAvailableError(
                f"connection to {self.host}:{self.port} lost: {exc}"))

    def _closed_by_peer(self) -> BrokerNotAvailableError:
        """The peer ended the stream. Right after a good handshake, on the first request and
        without answering it, is how a SASL listener treats a client that does not
        authenticate: say so (``after_handshake``; the cluster fails fast on it when no
        broker ever answered this client)."""
        addr = f"{self.host}:{self.port}"
        sec = self.security
        if self.answered == 0 and self._pending and self.core.broker_versions is not None \
                and (sec is None or not sec.use_sasl):
            proto = sec.protocol if sec is not None else "PLAINTEXT"
            err = BrokerNotAvailableError(
                f"{addr} closed the connection on the first request after the Kafka "
                f"handshake without answering it: the listener probably requires SASL "
                f"(security_protocol is {proto}; use SASL_PLAINTEXT or SASL_SSL with "
                "sasl_mechanism, sasl_username and sasl_password)", definite=True,
                after_handshake=True)
            return err
        return BrokerNotAvailableError(f"{addr} closed the connection")

    def close(self, error: BaseException | None = None) -> None:
        """Close the socket and fail every pending request with ``error``."""
        if self.error is None:
            self.error = error or BrokerNotAvailableError(f"connection to {self.host}:{self.port} closed")
            if self._transport is not None:    # it was up: say how it ended
                if self.cm is not None:
                    self.cm.conn_closed.value += 1
                from kcodec.client.errors import ClientClosedError
                if error is None or isinstance(error, ClientClosedError):
                    log.debug("closed the connection to %s:%s (node %s)", self.host, self.port,
                              self.node_id)
                else:
                    log.info("lost the connection to %s:%s (node %s): %s", self.host, self.port,
                             self.node_id, error)
        self.core.closed = True
        self.core.release()     # a partial frame of a dead connection goes at once
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(self.error)
                fut.exception()   # mark retrieved: nobody may be waiting any more
        if self._transport is not None:
            try:
                self._transport.close()
            except Exception:  # pragma: no cover - already closed
                pass
