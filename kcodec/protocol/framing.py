"""Request/response headers, whole frames, and a streaming frame splitter.

Wire layout (every Kafka request and response on a connection)::

    frame           := int32 size, byte[size]
    request body    := request_header  request_message
    request_header  := int16 api_key, int16 api_version, int32 correlation_id,
                       nullable_string client_id (int16 length, even in v2),
                       [tagged_fields]                       v2 (flexible requests) only
    response body   := response_header  response_message
    response_header := int32 correlation_id, [tagged_fields] v1 (flexible responses) only

Where a spec has a ``headerVersions`` map, the header version is the one it names for the
message version. Otherwise it is derived: the request header is v2 when the request version
is flexible, else v1; the response header is v1 when the response version is flexible, else
v0 — except ApiVersions responses, whose header is always v0 (a client that sent a too-new
version must still read the error).
"""

from __future__ import annotations

from typing import Any

from kcodec.errors import DecodeError, ProtocolError, TruncatedError
from kcodec.protocol.messages_index import REQUESTS, RESPONSES, RequestHeader, ResponseHeader

__all__ = [
    "request_header_version",
    "response_header_version",
    "encode_request",
    "decode_request",
    "encode_response",
    "decode_response",
    "read_response_header",
    "FrameSplitter",
    "DEFAULT_MAX_FRAME_SIZE",
]

API_VERSIONS_KEY = 18
DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024


def _declared(cls: Any, api_version: int) -> int | None:
    """The header version the spec's headerVersions map names for ``api_version``, if any."""
    for lo, hi, hv in cls.HEADER_VERSIONS:
        if lo <= api_version <= hi:
            return int(hv)
    return None


def request_header_version(api_key: int, api_version: int) -> int:
    """The spec's header version; without a map, 2 for flexible request versions, else 1."""
    cls = REQUESTS[api_key]
    declared = _declared(cls, api_version)
    if declared is not None:
        return declared
    return 2 if cls.is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """The spec's header version; without a map, 1 for flexible response versions, else 0,
    and always 0 for ApiVersions."""
    cls = RESPONSES[api_key]
    declared = _declared(cls, api_version)
    if declared is not None:
        return declared
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if cls.is_flexible(api_version) else 0


def _frame(parts: list[bytes]) -> bytes:
    size = sum(len(p) for p in parts)
    return b"".join([size.to_bytes(4, "big"), *parts])


def encode_request(msg: Any, version: int, correlation_id: int,
                   client_id: str | None = "kcodec", framed: bool = True) -> bytes:
    """Header + body of a request (with the int32 size prefix unless ``framed=False``)."""
    api_key = msg.API_KEY
    body = msg.encode(version)  # checks the version first
    hdr = RequestHeader(request_api_key=api_key, request_api_version=version,
                        correlation_id=correlation_id, client_id=client_id)
    head = hdr.encode(request_header_version(api_key, version))
    return _frame([head, body]) if framed else head + body


def decode_request(buf: Any, trailing_ok: bool = False,
                   max_items: int | None = None) -> tuple[Any, Any]:
    """Server side: ``(RequestHeader, request)`` from a frame body (no size prefix).

    ``max_items``: the request may hold at most that many array elements and tagged fields
    together, else ``DecodeLimitError`` before they are decoded.

    ``trailing_ok``: bytes after the request's fields are ignored instead of an error, as an
    Apache Kafka broker ignores them (librdkafka 2.12's Metadata v12 for every topic carries
    three such bytes)."""
    mv = memoryview(buf).cast("B") if not isinstance(buf, bytes) else buf
    if len(mv) < 4:
        raise TruncatedError(4, 0, len(mv), "request header")
    api_key = int.from_bytes(mv[0:2], "big", signed=True)
    version = int.from_bytes(mv[2:4], "big", signed=True)
    if api_key not in REQUESTS:
        raise ProtocolError(f"unknown API key {api_key}")
    cls = REQUESTS[api_key]
    cls.check_version(version)
    hdr, pos = RequestHeader.decode_from(mv, request_header_version(api_key, version))
    from kcodec.protocol.engine import decode_struct

    limits = None if max_items is None else {"*": max_items}
    return hdr, decode_struct(cls.plan(version), mv, pos, not trailing_ok, limits)[0]


def encode_response(msg: Any, version: int, correlation_id: int, framed: bool = True) -> bytes:
    """Header + body of a response (with the size prefix unless ``framed=False``)."""
    body = msg.encode(version)
    head = ResponseHeader(correlation_id=correlation_id).encode(
        response_header_version(msg.API_KEY, version))
    return _frame([head, body]) if framed else head + body


def read_response_header(buf: Any, api_key: int, api_version: int) -> tuple[Any, int]:
    """``(ResponseHeader, body_offset)`` of a response frame body (no size prefix)."""
    return ResponseHeader.decode_from(buf, response_header_version(api_key, api_version))


def decode_response(buf: Any, api_key: int, api_version: int,
                    correlation_id: int | None = None, limits: Any = None) -> tuple[int, Any]:
    """``(correlation_id, response)`` from a frame body (no size prefix).

    ``limits`` caps array elements by field path (``decode_struct``'s limits: a mapping
    such as ``{"MetadataResponse.topics": 1}``; DecodeLimitError past it).

    If ``correlation_id`` is given, a different one in the header raises ProtocolError.
    An ApiVersions response that does not parse at ``api_version`` is read as v0, the
    version brokers answer with when they do not support the requested one.
    """
    cls = RESPONSES[api_key]
    cls.check_version(api_version)
    hdr, pos = read_response_header(buf, api_key, api_version)
    if correlation_id is not None and hdr.correlation_id != correlation_id:
        raise ProtocolError(
            f"correlation id mismatch: expected {correlation_id}, got {hdr.correlation_id}")
    from kcodec.protocol.engine import decode_struct

    try:
        return hdr.correlation_id, decode_struct(cls.plan(api_version), buf, pos, True,
                                                 limits)[0]
    except DecodeError:
        # A broker that does not support the requested ApiVersions version answers with a
        # v0 body (error UNSUPPORTED_VERSION and its own ranges); Kafka's clients retry as v0.
        if api_key != API_VERSIONS_KEY or api_version == 0:
            raise
        return hdr.correlation_id, decode_struct(cls.plan(0), buf, pos, True, limits)[0]


class FrameSplitter:
    """Cuts complete frames out of a byte stream (sans-I/O).

        splitter = FrameSplitter()
        for body in splitter.feed(chunk):   # bytes of each complete frame, no size prefix
            ...

    A size below 0 or above ``max_frame_size`` raises ProtocolError at once (before any
    buffering of the body), so a hostile or desynchronised peer cannot make it allocate.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()

    @property
    def pending(self) -> int:
        """Bytes buffered that do not yet make a complete frame."""
        return len(self._buf)

    def feed(self, data: Any) -> list[bytes]:
        """Add ``data`` (bytes received) and return the bodies of the frames it completed."""
        self._buf += data
        out: list[bytes] = []
        buf = self._buf
        pos = 0
        n = len(buf)
        while True:
            if n - pos < 4:
                break
            size = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
            if size < 0 or size > self.max_frame_size:
                raise ProtocolError(
                    f"frame size {size} outside 0..{self.max_frame_size}; the stream is corrupt")
            if n - pos - 4 < size:
                break
            out.append(bytes(buf[pos + 4:pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return out
