"""A request class knows its API key and its response's class, in the code and in the stub:
the round trip is typed from the request object alone."""

from __future__ import annotations

import ast
from pathlib import Path

import kcodec.protocol as protocol
from kcodec.protocol import (
    REQUESTS,
    RESPONSES,
    ApiKey,
    FetchRequest,
    FetchResponse,
    Request,
    Response,
)


def test_each_request_names_its_api_key_and_response_class() -> None:
    assert set(REQUESTS) == set(RESPONSES) == {int(k) for k in ApiKey}
    for key, cls in REQUESTS.items():
        assert issubclass(cls, Request) and cls.API_KEY == key
        assert cls.RESPONSE is RESPONSES[key] and issubclass(cls.RESPONSE, Response)
        assert cls.NAME.removesuffix("Request") == cls.RESPONSE.NAME.removesuffix("Response")
    assert FetchRequest.RESPONSE is FetchResponse
    assert not issubclass(protocol.RequestHeader, (Request, Response))


def test_the_stub_types_each_request_by_its_response() -> None:
    stub = Path(protocol.__file__).with_name("__init__.pyi")
    bases = {n.name: ast.unparse(n.bases[0]) for n in ast.parse(stub.read_text()).body
             if isinstance(n, ast.ClassDef)}
    for cls in REQUESTS.values():
        assert bases[cls.NAME] == f"Request[{cls.RESPONSE.NAME}]"
        assert bases[cls.RESPONSE.NAME] == "Response"
