"""Sans-I/O connection core: bytes in, events out.

One ``Connection`` is the protocol state of one TCP connection to one broker: it frames
requests, numbers them (correlation ids), remembers what is in flight (API key, version)
so responses decode with the right header version, and negotiates versions from the
broker's ApiVersions answer. It never touches a socket: the I/O driver hands it received
bytes (``receive``) and sends the bytes it returns.

Framing::

    Frame => size:int32 payload:byte[size]       (responses arrive in request order)

A peer that breaks this -- an impossible size, bytes that do not decode, a correlation id
other than the oldest in flight, a frame cut off by end of stream -- raises
``ProtocolError``; the driver then closes the connection and fails what was pending.

Memory: a frame's size is checked when its four size bytes arrive, before any of its body
is held: above ``max_frame`` (the client's ``receive_message_max_bytes``) it is a
``ResponseTooLargeError``, and a frame when nothing is in flight is a ``ProtocolError``.
The body is gathered in one buffer of the announced size -- from 1 MiB on an anonymous
mapping whose pages are touched only as bytes arrive (a peer that announces much and
sends little costs only what it sent) and go back to the system when the frame is
dropped -- and is decoded in place: the records of a Fetch
answer are read-only views of it, never copies. ``release`` drops what a dead connection
held.
"""

from __future__ import annotations

import mmap
import struct
from collections import deque
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kcodec.client.errors import KafkaError, ResponseTooLargeError
from kcodec.client.net import requests
from kcodec.client.net import wire as _wire
from kcodec.errors import KcodecError, ProtocolError, UnsupportedVersionError
from kcodec.protocol import REQUESTS, ApiKey, ApiVersionsRequest, ApiVersionsResponse, ErrorCode
from kcodec.protocol import Request as RequestBody
from kcodec.protocol import Response as ResponseBody
from kcodec.protocol.versions import first_version_with

__all__ = ["Connection", "Response", "CLIENT_VERSIONS", "MAX_FRAME"]

# The default cap on one response: librdkafka's receive.message.max.bytes (100 MB). The
# Java client has no such cap (its fetch.max.bytes only asks the broker for less).
MAX_FRAME = 100_000_000
# frames from this size on are gathered in an anonymous mapping rather than on the heap
_OWN_PAGES = 1 << 20

# The versions this client speaks: (min, max) per API key. Produce and Fetch go up to their
# topic-id versions (KIP-516); requests fall back to the last name-based version when the
# metadata has no topic id (TOPIC_ID_VERSIONS).
CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 13),                 # 13: topic ids
    ApiKey.FETCH: (4, 17),                   # 13+: topic ids
    ApiKey.LIST_OFFSETS: (1, 9),
    ApiKey.METADATA: (1, 12),
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 7),
    ApiKey.FIND_COORDINATOR: (0, 3),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),              # 5: the group type
    ApiKey.DELETE_GROUPS: (0, 2),            # Admin.delete_groups
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 5),
    ApiKey.INIT_PRODUCER_ID: (0, 6),         # 6: two-phase commit (KIP-939)
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),    # v4+: the brokers' batched form
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 5),                  # 5: transactions v2 (KIP-890)
    ApiKey.TXN_OFFSET_COMMIT: (0, 5),        # 5: transactions v2
    ApiKey.SASL_HANDSHAKE: (1, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),     # KIP-848
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0),      # KIP-848
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),        # KIP-932 (v0 was Kafka 4.0's early access)
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.SHARE_FETCH: (1, 2),                  # 2: acquire mode, RENEW (KIP-1206, 1222)
    ApiKey.SHARE_ACKNOWLEDGE: (1, 2),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DESCRIBE_ACLS: (1, 3),            # v1+: pattern types (v0 knows literal names only)
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),    # KIP-664
    ApiKey.LIST_TRANSACTIONS: (0, 2),        # 1: duration filter, 2: id pattern
    ApiKey.DESCRIBE_CONFIGS: (1, 4),         # v0 removed in Kafka 4 (KIP-896)
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),   # KIP-554
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),           # KIP-546
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
}


# KIP-714 client telemetry (GetTelemetrySubscriptions, PushTelemetry), where kcodec's
# protocol classes have them (the newest spec set)
CLIENT_VERSIONS.update({k: (0, 0) for k in (71, 72) if k in REQUESTS})

# the first version of Produce and Fetch whose requests name topics by id (KIP-516), as the
# declarations say: where the metadata lacks an id, the version before it names them
TOPIC_ID_VERSIONS: dict[int, int] = {
    k: v for k in (ApiKey.PRODUCE, ApiKey.FETCH)
    if (v := first_version_with(REQUESTS[k], "topic_id")) is not None}


R = TypeVar("R", bound=ResponseBody)


@dataclass
class Response(Generic[R]):
    """One decoded response, for the request with ``correlation_id``; ``body`` is of the
    request's response class (``Response[FetchResponse]`` answers a ``FetchRequest``)."""

    correlation_id: int
    api_key: int
    version: int
    body: R


class Connection:
    """Protocol state of one connection (see the module docstring)."""

    def __init__(self, client_id: str | None = "kcodec", max_frame: int = MAX_FRAME) -> None:
        self.client_id = client_id
        self.max_frame = max_frame
        self._head = bytearray()              # the size bytes of the next frame
        self._body: bytearray | mmap.mmap | None = None   # the frame being gathered
        self._size = 0                        # its announced size
        self._filled = 0                      # and how much of it came
        self._next_id = 0
        # (cid, api_key, version, the answer's limits: wire.response_limits)
        self._inflight: deque[tuple[int, int, int, dict[str, int] | None]] = deque()
        self._unanswered: set[int] = set()   # acks=0 produce: a response may or may not come
        self.broker_versions: dict[int, tuple[int, int]] | None = None
        self.features: dict[str, int] = {}   # finalized feature levels (ApiVersions v3+)
        self.no_flexible = False
        self.closed = False

    # ------------------------------------------------------------------ versions
    @staticmethod
    def handshake_request(version: int = 3) -> ApiVersionsRequest:
        """The ApiVersions request that opens a connection, for ``version``."""
        return requests.api_versions(version, _version())

    def handshake(self, version: int = 3) -> tuple[int, bytes]:
        """The ApiVersions request that opens a connection, framed (``request``)."""
        return self.request(self.handshake_request(version), version)

    def on_api_versions(self, resp: Response[ApiVersionsResponse]) -> bool:
        """Record the broker's versions. False means: retry the handshake at the version
        ``api_versions_retry_version`` gives (the broker does not speak the one sent)."""
        body = resp.body
        if body.error_code == ErrorCode.UNSUPPORTED_VERSION and resp.version > 0:
            return False
        if body.error_code:
            raise KafkaError(body.error_code, "ApiVersions")
        self.broker_versions = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        self.features = {f.name: f.max_version_level for f in body.finalized_features or ()}
        # A broker that cannot answer ApiVersions v3 predates flexible versions (KIP-482 and
        # KIP-511 came together); some such brokers (librdkafka's mock cluster) advertise
        # flexible versions of the group APIs but cannot parse them: use none there.
        self.no_flexible = self.broker_versions.get(ApiKey.API_VERSIONS, (0, 3))[1] < 3
        return True

    @staticmethod
    def api_versions_retry_version(resp: Response[ApiVersionsResponse]) -> int:
        """After UNSUPPORTED_VERSION: the highest ApiVersions version the broker listed
        (KIP-511: its v0 error body names its own range), else 0."""
        for k in resp.body.api_keys or ():
            if k.api_key == ApiKey.API_VERSIONS:
                return max(0, min(k.max_version, resp.version - 1))
        return 0

    def version(self, api_key: int) -> int:
        """The highest version both sides speak."""
        if api_key not in CLIENT_VERSIONS:
            raise UnsupportedVersionError(f"this client does not speak {_name(api_key)}")
        lo, hi = CLIENT_VERSIONS[api_key]
        if self.broker_versions is None:
            return lo
        if api_key not in self.broker_versions:
            raise UnsupportedVersionError(f"the broker does not support {_name(api_key)}")
        blo, bhi = self.broker_versions[api_key]
        if self.no_flexible:
            fmin = _flexible_from(api_key)
            if fmin is not None and fmin - 1 >= max(lo, blo):
                bhi = min(bhi, fmin - 1)
        v = min(hi, bhi)
        if v < max(lo, blo):
            raise UnsupportedVersionError(
                f"no common version of {_name(api_key)}: client {lo}-{hi}, broker {blo}-{bhi}")
        return v

    # ------------------------------------------------------------------ requests
    def request(self, req: RequestBody[Any], version: int | None = None,
                expect_response: bool = True) -> tuple[int, bytes]:
        """(correlation_id, frame bytes) of ``req`` (the API key is its class's); remember
        it as in flight."""
        _wire.check_request(req)
        if self.closed:
            raise ProtocolError("connection is closed")
        api_key = req.API_KEY
        if version is None:
            version = self.version(api_key)
        cid = self._next_id
        self._next_id = (cid + 1) & 0x7FFFFFFF
        data = _wire.encode_request(req, version, cid, self.client_id)
        if expect_response:
            self._inflight.append((cid, api_key, version, _wire.response_limits(req)))
        else:
            self._unanswered.add(cid)
            if len(self._unanswered) > 10000:
                self._unanswered.clear()
        return cid, data

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    def in_flight_ids(self) -> list[int]:
        return [c for c, _, _, _ in self._inflight]

    def last_version(self) -> int | None:
        """The version of the last request awaiting an answer (None: none awaits)."""
        return self._inflight[-1][2] if self._inflight else None

    # ------------------------------------------------------------------ responses
    def receive(self, data: Any) -> list[Response[Any]]:
        """Feed received bytes; return the responses they complete (in request order)."""
        out = []
        payload = None
        try:
            for payload in self._frames(data):
                r = self._decode(payload)
                if r is not None:
                    out.append(r)
            return out
        except KcodecError as exc:
            err: KcodecError = exc if isinstance(exc, ProtocolError) else \
                ProtocolError(f"undecodable response: {exc}")
            if err is not exc:
                err.__cause__ = exc
        # out of the handler, and the frame let go: an error kept for reporting must not
        # keep a dead connection's frame alive through its traceback
        payload = None
        self.closed = True
        self.release()
        raise _detached(err)

    def _frames(self, data: Any) -> list[memoryview]:
        """The frames ``data`` completes, as read-only views of their own buffers."""
        out: list[memoryview] = []
        mv = memoryview(data)
        if mv.ndim != 1 or mv.format != "B":
            mv = mv.cast("B")
        pos, n = 0, len(mv)
        while pos < n:
            body = self._body
            if body is None:
                take = min(4 - len(self._head), n - pos)
                self._head += mv[pos:pos + take]
                pos += take
                if len(self._head) < 4:
                    break
                size = int.from_bytes(self._head, "big", signed=True)
                self._head.clear()
                self._check_size(size)
                self._size, self._filled = size, 0
                # a large frame gets pages of its own: touched only as bytes arrive, and
                # given back to the system the moment the last view of it goes
                body = self._body = bytearray(size) if size < _OWN_PAGES else \
                    mmap.mmap(-1, size)
            filled = self._filled
            take = min(self._size - filled, n - pos)
            body[filled:filled + take] = mv[pos:pos + take]
            pos += take
            self._filled = filled = filled + take
            if filled == self._size:
                self._body = None
                out.append(memoryview(body).toreadonly())
        return out

    def _check_size(self, size: int) -> None:
        """Refuse a frame before holding any of it."""
        head = size.to_bytes(4, "big", signed=True)
        if head[0] in (0x15, 0x16) and head[1] == 0x03 and head[2] <= 0x04:
            # a TLS record (alert or handshake) where a Kafka size should be
            raise ProtocolError("the peer answered with TLS, not Kafka: the listener requires "
                                "TLS (security_protocol SSL or SASL_SSL)")
        if size > self.max_frame:
            raise ResponseTooLargeError("response", size, self.max_frame)
        if size < 4:
            raise ProtocolError(f"response frame size {size}: a frame holds at least its "
                                "4-byte correlation id; the stream is corrupt")
        if not self._inflight and not self._unanswered:
            raise ProtocolError(f"a response frame of {size} bytes arrived with no request "
                                "in flight")

    @property
    def pending(self) -> int:
        """Bytes held of a frame not yet complete."""
        return len(self._head) + (self._filled if self._body is not None else 0)

    def release(self) -> None:
        """Drop the partial frame (the connection is dead: its memory goes at once)."""
        self._head = bytearray()
        self._body = None

    def _decode(self, payload: memoryview) -> Response[Any] | None:
        if len(payload) < 4:
            raise ProtocolError(f"response frame of {len(payload)} bytes has no header")
        cid = struct.unpack_from(">i", payload, 0)[0]
        if not self._inflight or self._inflight[0][0] != cid:
            if cid in self._unanswered:
                self._unanswered.discard(cid)
                return None
            expected = self._inflight[0][0] if self._inflight else None
            raise ProtocolError(f"response with correlation id {cid}, expected {expected}")
        _, api_key, version, limits = self._inflight.popleft()
        if api_key == ApiKey.API_VERSIONS and version > 0 and \
                int.from_bytes(payload[4:6], "big") == ErrorCode.UNSUPPORTED_VERSION:
            return Response(cid, api_key, version, _unsupported_api_versions(payload))
        _, body = _wire.decode_response(api_key, version, payload, limits)
        return Response(cid, api_key, version, body)

    def eof(self) -> None:
        """The peer closed the stream; a partial frame there is a protocol error."""
        self.closed = True
        held = self.pending
        self.release()
        if held:
            raise ProtocolError(
                f"connection closed in the middle of a frame ({held} bytes held)")


def _detached(err: BaseException) -> BaseException:
    """``err`` and its causes without their tracebacks (whose frames hold the frame)."""
    seen = set()
    e: BaseException | None = err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.__traceback__ = None
        e = e.__cause__ or e.__context__
    return err


def _unsupported_api_versions(payload: Any) -> Any:
    """The body of an UNSUPPORTED_VERSION answer to ApiVersions (``Response.version`` stays
    the asked one). Kafka sends a version 0 body listing its ApiVersions range (KIP-511);
    some brokers (librdkafka's mock cluster) send bytes that decode at no version: then
    the range is unknown and the handshake is retried at version 0."""
    from kcodec.protocol import RESPONSES

    try:
        return _wire.decode_response(ApiKey.API_VERSIONS, 0, payload)[1]
    except KcodecError:
        return RESPONSES[ApiKey.API_VERSIONS](error_code=ErrorCode.UNSUPPORTED_VERSION,
                                              api_keys=[])


def _flexible_from(api_key: int) -> int | None:
    from kcodec.protocol import REQUESTS

    cls = REQUESTS.get(api_key)
    fv = getattr(cls, "FLEXIBLE_VERSIONS", None)
    return fv[0] if fv else None


def _name(api_key: int) -> str:
    return _wire.api_name(api_key)


def _version() -> str:
    from kcodec._version import __version__
    return __version__
