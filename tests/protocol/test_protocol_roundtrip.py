"""Round trip every message at every version with random instances, in both twins.

Both twins must produce the same bytes, and each must decode them back to an object equal
to the original (unknown tagged fields included).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcodec import _impl
from kcodec.protocol import CLASSES
from kcodec.protocol import _plan as P
from tests.conftest import IMPLS
from tests.support.protocol_strategies import all_versions, plan_strategy

TWINS = [_impl.twin("engine", impl) for impl in IMPLS]
CASES = all_versions()


def check_round_trip(name: str, version: int, data: st.DataObject) -> None:
    cls = CLASSES[name]
    plan = cls.plan(version)
    obj = data.draw(plan_strategy(plan, unknown_tags=True), label=name)
    encoded = [t.encode_struct(plan, obj) for t in TWINS]
    assert all(e == encoded[0] for e in encoded), "twins encode differently"
    for t in TWINS:
        decoded, end = t.decode_struct(plan, encoded[0], 0, True)
        assert end == len(encoded[0])
        assert decoded == obj
    assert cls.decode(obj.encode(version), version) == obj


@pytest.mark.parametrize(("name", "version"), CASES)
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_round_trip(name: str, version: int, data: st.DataObject) -> None:
    check_round_trip(name, version, data)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "version"), CASES)
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_round_trip_many(name: str, version: int, data: st.DataObject) -> None:
    check_round_trip(name, version, data)


def test_every_message_of_the_specs_is_covered() -> None:
    # every API key from 0 to 93 but the four ZooKeeper-era ones Kafka 4.0 removed (4-7),
    # request and response; two headers, two consumer protocol structs.
    kinds = [c.KIND for c in CLASSES.values()]
    assert kinds.count("request") == 90 and kinds.count("response") == 90
    keys = {c.API_KEY for c in CLASSES.values() if c.KIND == "request"}
    assert keys == set(range(94)) - {4, 5, 6, 7}
    assert {"RequestHeader", "ResponseHeader", "ConsumerProtocolSubscription",
            "ConsumerProtocolAssignment"} <= set(CLASSES)


def test_wire_codes_agree_between_plan_and_twins() -> None:
    from kcodec._py import engine as py

    for name, code in P.CODES.items():
        assert getattr(py, name) == code
    if "cython" in IMPLS:
        from kcodec._cy import engine as cy

        assert cy.CODES == P.CODES
