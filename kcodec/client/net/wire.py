"""The client's adapter onto ``kcodec.protocol``: typed requests framed for a version.

The client builds its requests as the generated message classes (kcodec.client.net.requests)
with every field it knows; encoding for the negotiated version leaves out the fields that
version lacks (the message's ``for_version``), as franz-go's kmsg writes only the fields of
the version set on a request. A plain dict of field names is still taken (``build``), but a name the
message does not have is a ``TypeError``, as the classes themselves raise. Responses decode
into the protocol's message objects.
"""

from __future__ import annotations

from typing import Any

from kcodec.errors import KcodecError, ProtocolError, UnsupportedVersionError
from kcodec.protocol import REQUESTS, RESPONSES, ApiKey
from kcodec.protocol import decode_response as _decode_response
from kcodec.protocol import encode_request as _encode_request

__all__ = ["encode_request", "decode_response", "build", "api_name"]


def build(cls: type, value: Any, version: int) -> Any:
    """A ``cls`` object from a dict of field names (recursively) with only the fields
    ``version`` has; a name ``cls`` does not have is a ``TypeError``."""
    return cls.from_dict(value).for_version(version)  # type: ignore[attr-defined]


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
        msg = body.for_version(version)
    else:
        raise TypeError(f"{ApiKey(api_key).name} takes a {cls.__name__}, "
                        f"not a {type(body).__name__}")
    return _encode_request(msg, version, correlation_id, client_id)


def decode_response(api_key: int, version: int, payload: Any) -> tuple[int, Any]:
    """(correlation_id, response) of one frame's payload; any decoding failure is a ProtocolError."""
    try:
        return _decode_response(payload, api_key, version)
    except ProtocolError:
        raise
    except KcodecError as exc:
        # the failure without its traceback: in the pure twin its frames hold what the
        # decode had made so far (copies of the frame's unknown tagged fields: up to the
        # frame's size), which must not stay alive through the second attempt
        err = _bare(exc)
    lenient = _lenient(api_key, version, payload)
    if lenient is not None:
        return lenient
    raise ProtocolError(f"undecodable {RESPONSES[api_key].NAME} v{version}: {err}") from err


def _bare(exc: BaseException) -> BaseException:
    """``exc`` and the exceptions it chains to, their tracebacks dropped."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.__traceback__ = None
        if e.__cause__ is not None:
            _bare(e.__cause__)
        e = e.__context__
    return exc


def _lenient(api_key: int, version: int, payload: Any) -> tuple[int, Any] | None:
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
