"""Every message class, built once from the generated declarations.

``CLASSES[name]`` for every spec (requests, responses, headers, consumer protocol structs),
``REQUESTS[api_key]`` and ``RESPONSES[api_key]``; each request class's ``RESPONSE`` is its
API's response class.
"""

from __future__ import annotations

import importlib

from kcodec.protocol._struct import Message, build_message
from kcodec.protocol.messages import MODULES

__all__ = ["CLASSES", "REQUESTS", "RESPONSES", "RequestHeader", "ResponseHeader"]

CLASSES: dict[str, type[Message]] = {}
REQUESTS: dict[int, type[Message]] = {}
RESPONSES: dict[int, type[Message]] = {}

for _mod in MODULES:
    for _decl in importlib.import_module(f"kcodec.protocol.messages.{_mod}").DECLS:
        _cls = build_message(_decl)
        CLASSES[_decl.name] = _cls
        if _decl.kind == "request":
            REQUESTS[_decl.api_key] = _cls
        elif _decl.kind == "response":
            RESPONSES[_decl.api_key] = _cls

for _key, _cls in REQUESTS.items():
    _cls.RESPONSE = RESPONSES[_key]     # type: ignore[attr-defined]

REQUESTS = dict(sorted(REQUESTS.items()))
RESPONSES = dict(sorted(RESPONSES.items()))
RequestHeader = CLASSES["RequestHeader"]
ResponseHeader = CLASSES["ResponseHeader"]
