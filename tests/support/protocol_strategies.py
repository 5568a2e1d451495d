"""Hypothesis strategies: random instances of any message at any version, from its plan.

Only fields present in the version get random values (the others keep their defaults, as
a decoded object would); tagged fields are random too, so they are sometimes default
(absent on the wire) and sometimes not. In flexible versions, random unknown tags are
added to some structs to check they survive a round trip.
"""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import strategies as st

from kcodec.protocol import _plan as P

_INT = {
    P.INT8: (-(1 << 7), (1 << 7) - 1), P.INT16: (-(1 << 15), (1 << 15) - 1),
    P.INT32: (-(1 << 31), (1 << 31) - 1), P.INT64: (-(1 << 63), (1 << 63) - 1),
    P.UINT16: (0, 0xFFFF), P.UINT32: (0, 0xFFFFFFFF), P.UVARINT: (0, 0xFFFFFFFF),
}

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
UUIDS = st.one_of(st.just(uuid.UUID(int=0)), st.builds(lambda i: uuid.UUID(int=i), st.integers(0, (1 << 128) - 1)))

_cache: dict[tuple[int, bool], Any] = {}


def prim(code: int, unknown_tags: bool) -> Any:
    if code in _INT:
        lo, hi = _INT[code]
        return st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, 0, -1 if lo < 0 else 1]))
    if code == P.FLOAT64:
        return st.floats(allow_nan=False)
    if code == P.BOOL:
        return st.booleans()
    if code == P.UUID:
        return UUIDS
    if code in (P.STRING, P.CSTRING):
        return TEXT
    if code in (P.BYTES, P.CBYTES, P.RECORDS, P.CRECORDS):
        return st.binary(max_size=12)
    raise AssertionError(code)


def value(op: tuple, unknown_tags: bool) -> Any:
    code, _key, _what, nullable, elem, sub, _tag, _default = op
    if code in (P.ARRAY, P.CARRAY):
        inner = plan_strategy(sub, unknown_tags) if elem == P.STRUCT else prim(elem, unknown_tags)
        s = st.lists(inner, max_size=3)
    elif code == P.STRUCT:
        s = plan_strategy(sub, unknown_tags)
    else:
        s = prim(code, unknown_tags)
    return st.one_of(st.none(), s) if nullable else s


def plan_strategy(plan: P.StructPlan, unknown_tags: bool = False) -> Any:
    """Random instances of ``plan.cls`` valid at ``plan.version``."""
    key = (id(plan), unknown_tags)
    if key in _cache:
        return _cache[key]
    fields = {op[1]: value(op, unknown_tags) for op in plan.ops + plan.tagged}
    build = st.fixed_dictionaries(fields)
    if unknown_tags and plan.flexible:
        known = set(plan.tag_map)
        tags = st.dictionaries(
            st.integers(0, 300).filter(lambda t: t not in known), st.binary(max_size=5), max_size=2)
        s = st.tuples(build, tags).map(lambda t: _make(plan.cls, t[0], t[1]))
    else:
        s = build.map(lambda kw: plan.cls(**kw))
    _cache[key] = s
    return s


def _make(cls: Any, kw: dict, tags: dict) -> Any:
    obj = cls(**kw)
    if tags:
        obj._unknown_tags = tags
    return obj


def all_versions() -> list[tuple[str, int]]:
    """Every (message name, version) the library declares."""
    from kcodec.protocol import CLASSES

    return [(name, v) for name, cls in sorted(CLASSES.items())
            for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)]
