"""The client's adapter onto ``kcodec.protocol``: typed requests framed for a version.

The client builds its requests as the generated message classes (kcodec.client.net.requests)
with every field it knows; encoding for the negotiated version leaves out the fields that
version lacks (``for_version``), as franz-go's kmsg writes only the fields of the version
set on a request. A plain dict of field names is still taken (``build``), but a name the
message does not have is a ``TypeError``, as the classes themselves raise. Responses decode
into the protocol's message objects.
"""

from __future__ import annotations

from typing import Any

from kcodec.errors import KcodecError, ProtocolError, UnsupportedVersionError
from kcodec.protocol import REQUESTS, RESPONSES, ApiKey
from kcodec.protocol import decode_response as _decode_response
from kcodec.protocol import encode_request as _encode_request
from kcodec.protocol._decl import in_range

__all__ = ["encode_request", "decode_response", "build", "for_version", "api_name"]


def for_version(msg: Any, version: int) -> Any:
    """A copy of ``msg`` (a message or struct object) with only the fields ``version`` has;
    the others, at their defaults, are not written."""
    cls = type(msg)
    kw = {}
    for fi in cls._info:
        if not in_range(version, fi.versions):
            continue
        v = getattr(msg, fi.name)
        if fi.struct_cls is not None and v is not None:
            v = [for_version(x, version) for x in v] if fi.is_array else for_version(v, version)
        kw[fi.name] = v
    return cls(**kw)


def build(cls: type, value: Any, version: int) -> Any:
    """A ``cls`` object from a dict of field names (recursively) with only the fields
    ``version`` has; a name ``cls`` does not have is a ``TypeError``. Objects are taken as
    they are (``for_version`` does that)."""
    if not isinstance(value, dict):
        return value
    names = cls._names  # type: ignore[attr-defined]
    for key in value:
        if key not in names:
            raise TypeError(f"{cls.__name__} has no field {key!r}")
    kw = {}
    for fi in cls._info:  # type: ignore[attr-defined]
        if fi.name not in value or not in_range(version, fi.versions):
            continue
        v = value[fi.name]
        sc = fi.struct_cls
        if sc is not None and v is not None:
            v = [build(sc, x, version) for x in v] if fi.is_array else build(sc, v, version)
        kw[fi.name] = v
    return cls(**kw)


def api_name(api_key: int) -> str:
    cls = REQUESTS.get(api_key)
    return cls.NAME[: -len("Request")] if cls is not None else f"API {api_key}"


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str | None,
                   body: Any) -> bytes:
    """A whole request frame (int32 size, header, body)."""
    cls = REQUESTS.get(api_key)
    if cls is None:
        raise UnsupportedVersionError(f"API key {api_key} is not known to kcodec")
    if body is None:
        msg = cls()
    elif isinstance(body, dict):
        msg = build(cls, body, version)
    elif type(body) is cls:
        msg = for_version(body, version)
    else:
        raise TypeError(f"{ApiKey(api_key).name} takes a {cls.__name__}, "
                        f"not a {type(body).__name__}")
    return _encode_request(msg, version, correlation_id, client_id)


def decode_response(api_key: int, version: int, payload: bytes) -> tuple[int, Any]:
    """(correlation_id, response) of one frame's payload; any decoding failure is a ProtocolError."""
    try:
        return _decode_response(payload, api_key, version)
    except ProtocolError:
        raise
    except KcodecError as exc:
        lenient = _lenient(api_key, version, payload)
        if lenient is not None:
            return lenient
        raise ProtocolError(f"undecodable {RESPONSES[api_key].NAME} v{version}: {exc}") from exc


def _lenient(api_key: int, version: int, payload: bytes) -> tuple[int, Any] | None:
    """The response decoded with bytes left after it ignored, as Kafka's Java client does
    (librdkafka's mock cluster pads some flexible responses with a byte); None if it does
    not decode even so."""
    from kcodec.protocol import read_response_header
    from kcodec.protocol.engine import decode_struct

    try:
        hdr, pos = read_response_header(payload, api_key, version)
        return hdr.correlation_id, decode_struct(RESPONSES[api_key].plan(version), payload,
                                                 pos, False)[0]
    except KcodecError:
        return None
