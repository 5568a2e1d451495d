"""The handler table: handlers are registered by their request class (the API key comes
from it), one per API, and mypy checks a handler's body and answer against that class."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcodec.broker import apis
from kcodec.broker.apis.registry import HANDLERS, VERSIONS, api
from kcodec.protocol import REQUESTS, MetadataRequest, MetadataResponse
from tests.support.typecheck import mypy


def test_every_handler_is_registered_under_its_request_class_key() -> None:
    assert HANDLERS and set(HANDLERS) == set(VERSIONS)
    for key, (lo, hi) in VERSIONS.items():
        cls = REQUESTS[key]
        assert cls.MIN_VERSION <= lo <= hi <= cls.MAX_VERSION, cls.__name__
    assert apis.HANDLERS is HANDLERS


def test_only_a_request_class_registers() -> None:
    with pytest.raises(TypeError, match="MetadataResponse is not the request class"):
        api(MetadataResponse, 0, 1)            # type: ignore[type-var]
    with pytest.raises(TypeError, match="is not the request class"):
        api(MetadataRequest.MetadataRequestTopic, 0, 1)   # type: ignore[type-var]


def test_a_second_handler_for_one_api_is_refused() -> None:
    before = dict(HANDLERS)

    def metadata_again(node, req):  # pragma: no cover - never called
        raise AssertionError

    with pytest.raises(TypeError, match="API MetadataRequest has two handlers: metadata and "
                                        "test_a_second_handler"):
        api(MetadataRequest, 0, 12)(metadata_again)
    assert HANDLERS == before


GOOD = """\
from kcodec.broker.apis.registry import Answer, Incoming, api
from kcodec.protocol import MetadataRequest, MetadataResponse

@api(MetadataRequest, 0, 12)
def handler(node: object, req: Incoming[MetadataRequest]) -> Answer[MetadataResponse]:
    auto: bool = req.body.allow_auto_topic_creation
    return MetadataResponse(cluster_id="c", topics=[])
"""

BAD = """\
from kcodec.broker.apis.registry import Answer, Incoming, api
from kcodec.protocol import FetchRequest, FetchResponse, MetadataRequest, MetadataResponse

@api(MetadataRequest, 0, 12)
def wrong_body(node: object, req: Incoming[FetchRequest]) -> Answer[FetchResponse]:
    return FetchResponse()

@api(MetadataRequest, 0, 12)
def misspelt(node: object, req: Incoming[MetadataRequest]) -> Answer[MetadataResponse]:
    req.body.allow_auto_topic_creatoin
    return MetadataResponse(cluster_idd="c")

@api(MetadataRequest, 0, 12)
def wrong_answer(node: object, req: Incoming[MetadataRequest]) -> Answer[MetadataResponse]:
    return FetchResponse()
"""


@pytest.mark.slow
def test_mypy_checks_a_handler_against_its_request_class(tmp_path: Path) -> None:
    r = mypy(tmp_path, "good.py", GOOD)
    assert r.returncode == 0, r.stdout
    r = mypy(tmp_path, "bad.py", BAD)
    assert r.returncode == 1, r.stdout
    out = r.stdout
    assert 'bad.py:4: error: Argument 1 has incompatible type' in out, out
    assert '"MetadataRequest" has no attribute "allow_auto_topic_creatoin"' in out, out
    assert 'Unexpected keyword argument "cluster_idd" for "MetadataResponse"' in out, out
    assert 'bad.py:15: error: Incompatible return value type (got "FetchResponse"' in out, out
