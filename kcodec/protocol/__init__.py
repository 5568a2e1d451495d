"""The Kafka request/response protocol: every client-facing API at every version.

    >>> from kcodec.protocol import MetadataRequest, MetadataResponse
    >>> req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")])
    >>> body = req.encode(12)
    >>> MetadataRequest.decode(body, 12) == req
    True

* One class per message, named as in Kafka's specs, all versions folded in (requests derive
  from ``Request``, typed by their response class, ``RESPONSE``; responses from
  ``Response``); nested structs
  are classes on the message class (``MetadataResponse.MetadataResponseBroker``), named
  as the spec names the struct type. Attributes are the snake_case spec field names, each
  defaulting to its spec default.
* ``msg.encode(version) -> bytes`` and ``Cls.decode(buf, version)`` handle a body without
  its header; ``REQUESTS[api_key]``/``RESPONSES[api_key]`` map API keys to classes, and
  ``ApiKey`` names the keys (``ApiKey.METADATA == 3``).
* Headers and frames: :mod:`kcodec.protocol.framing`; version negotiation:
  :mod:`kcodec.protocol.versions`; error codes: :class:`ErrorCode`.

    api_keys.py        Kafka's API keys by name (generated with the messages)
    messages/          the declarations of every message, generated from the specs
    messages_index.py  every message class, built once from the declarations
    _decl.py           the declaration records the generated modules use
    _struct.py         message and struct classes built from the declarations, their plans
    _plan.py           encode/decode plans, one per (struct class, version), choices resolved
    engine.py          the plan interpreter ``kcodec._impl`` chose: encode and decode a struct
    framing.py         request/response headers, whole frames, a streaming frame splitter
    versions.py        version negotiation: the highest version both sides support
    error_codes.py     the broker error codes as an enum: name, description, retriable flag
    acl.py             Kafka's ACL model, shared by the broker's authorizer and admin calls
    consumer.py        the consumer protocol's subscription and assignment (in group APIs)
"""

from __future__ import annotations

from typing import Any

from kcodec.protocol._struct import Message, Request, Response, Struct
from kcodec.protocol.api_keys import ApiKey
from kcodec.protocol.error_codes import ErrorCode
from kcodec.protocol.framing import (
    DEFAULT_MAX_FRAME_SIZE,
    FrameSplitter,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    read_response_header,
    request_header_version,
    response_header_version,
)
from kcodec.protocol.messages_index import CLASSES, REQUESTS, RESPONSES
from kcodec.protocol.versions import broker_versions, negotiate, pick_version, supported_versions

__all__ = [
    "Message", "Request", "Response", "Struct", "ApiKey", "ErrorCode", "CLASSES", "REQUESTS", "RESPONSES",
    "encode_request", "decode_request", "encode_response", "decode_response",
    "read_response_header", "request_header_version", "response_header_version",
    "FrameSplitter", "DEFAULT_MAX_FRAME_SIZE",
    "supported_versions", "broker_versions", "pick_version", "negotiate",
    *sorted(CLASSES),
]

globals().update(CLASSES)


def __getattr__(name: str) -> Any:  # pragma: no cover - a helpful error for typos
    raise AttributeError(f"module 'kcodec.protocol' has no attribute {name!r}")
