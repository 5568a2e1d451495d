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
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass
from typing import Any

from kcodec.client.errors import KafkaError
from kcodec.client.net import requests
from kcodec.client.net import wire as _wire
from kcodec.errors import KcodecError, ProtocolError, UnsupportedVersionError
from kcodec.protocol import ApiKey, ErrorCode, FrameSplitter

__all__ = ["Connection", "Response", "CLIENT_VERSIONS", "MAX_FRAME"]

MAX_FRAME = 512 * 1024 * 1024

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
}


# the first version of an API whose requests name topics by id only
TOPIC_ID_VERSIONS: dict[int, int] = {ApiKey.PRODUCE: 13, ApiKey.FETCH: 13}


@dataclass
class Response:
    """One decoded response, for the request with ``correlation_id``."""

    correlation_id: int
    api_key: int
    version: int
    body: Any


class Connection:
    """Protocol state of one connection (see the module docstring)."""

    def __init__(self, client_id: str | None = "kcodec", max_frame: int = MAX_FRAME) -> None:
        self.client_id = client_id
        self._frames = FrameSplitter(max_frame)
        self._next_id = 0
        self._inflight: deque[tuple[int, int, int]] = deque()   # (cid, api_key, version)
        self._unanswered: set[int] = set()   # acks=0 produce: a response may or may not come
        self.broker_versions: dict[int, tuple[int, int]] | None = None
        self.features: dict[str, int] = {}   # finalized feature levels (ApiVersions v3+)
        self.no_flexible = False
        self.closed = False

    # ------------------------------------------------------------------ versions
    def handshake(self, version: int = 3) -> tuple[int, bytes]:
        """The ApiVersions request that opens a connection."""
        return self.request(ApiKey.API_VERSIONS, requests.api_versions(version, _version()),
                            version)

    def on_api_versions(self, resp: Response) -> bool:
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
    def api_versions_retry_version(resp: Response) -> int:
        """After UNSUPPORTED_VERSION: the highest ApiVersions version the broker listed
        (KIP-511: its v0 error body names its own range), else 0."""
        for k in resp.body.api_keys or ():
            if k.api_key == ApiKey.API_VERSIONS:
                return max(0, min(k.max_version, resp.version - 1))
        return 0

    def version(self, api_key: int) -> int:
        """The highest version both sides speak."""
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
    def request(self, api_key: int, body: Any, version: int | None = None,
                expect_response: bool = True) -> tuple[int, bytes]:
        """(correlation_id, frame bytes) of a request; remember it as in flight."""
        if self.closed:
            raise ProtocolError("connection is closed")
        if version is None:
            version = self.version(api_key)
        cid = self._next_id
        self._next_id = (cid + 1) & 0x7FFFFFFF
        data = _wire.encode_request(api_key, version, cid, self.client_id, body)
        if expect_response:
            self._inflight.append((cid, api_key, version))
        else:
            self._unanswered.add(cid)
            if len(self._unanswered) > 10000:
                self._unanswered.clear()
        return cid, data

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    def in_flight_ids(self) -> list[int]:
        return [c for c, _, _ in self._inflight]

    # ------------------------------------------------------------------ responses
    def receive(self, data: bytes) -> list[Response]:
        """Feed received bytes; return the responses they complete (in request order)."""
        try:
            payloads = self._frames.feed(data)
            out = []
            for payload in payloads:
                r = self._decode(payload)
                if r is not None:
                    out.append(r)
            return out
        except ProtocolError:
            self.closed = True
            raise
        except KcodecError as exc:
            self.closed = True
            raise ProtocolError(f"undecodable response: {exc}") from exc

    def _decode(self, payload: bytes) -> Response | None:
        if len(payload) < 4:
            raise ProtocolError(f"response frame of {len(payload)} bytes has no header")
        cid = struct.unpack_from(">i", payload, 0)[0]
        if not self._inflight or self._inflight[0][0] != cid:
            if cid in self._unanswered:
                self._unanswered.discard(cid)
                return None
            expected = self._inflight[0][0] if self._inflight else None
            raise ProtocolError(f"response with correlation id {cid}, expected {expected}")
        _, api_key, version = self._inflight.popleft()
        if api_key == ApiKey.API_VERSIONS and version > 0 and \
                int.from_bytes(payload[4:6], "big") == ErrorCode.UNSUPPORTED_VERSION:
            return Response(cid, api_key, version, _unsupported_api_versions(payload))
        _, body = _wire.decode_response(api_key, version, payload)
        return Response(cid, api_key, version, body)

    def eof(self) -> None:
        """The peer closed the stream; a partial frame there is a protocol error."""
        self.closed = True
        if self._frames.pending:
            raise ProtocolError(
                f"connection closed in the middle of a frame ({self._frames.pending} bytes held)")


def _unsupported_api_versions(payload: bytes) -> Any:
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
