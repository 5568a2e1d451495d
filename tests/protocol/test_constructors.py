"""Each generated class builds its objects with a constructor of its own (made on its first
object): every class, every field, the same objects the generic constructor makes."""

from __future__ import annotations

import pytest

import kcodec.protocol as protocol
from kcodec.protocol import _struct
from kcodec.protocol._struct import UNKNOWN_TAGS, Struct


def _classes() -> list[type[Struct]]:
    out, todo = [], [Struct]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if "_defaults" in sub.__dict__:
                out.append(sub)
    return out


def _generic(cls: type[Struct], **fields: object) -> Struct:
    obj = cls.__new__(cls)
    _struct._generic_init(obj, fields)
    return obj


def _state(obj: Struct) -> tuple:
    return tuple((k, getattr(obj, k)) for k in obj._slots)


def test_every_class_builds_what_the_generic_constructor_builds():
    protocol.ProduceRequest()            # (the classes are built with the package)
    classes = _classes()
    assert len(classes) > 400
    for cls in classes:
        a, b = cls(), _generic(cls)
        assert "__init__" in cls.__dict__, cls
        assert _state(a) == _state(b), cls
        assert getattr(a, UNKNOWN_TAGS) is None
        for k, _factory in cls._fresh:       # fresh lists and structs, one per object
            assert getattr(a, k) is not getattr(cls(), k), (cls, k)
        given = {k: f"v-{k}" for k in list(cls._defaults)[:3] + [k for k, _ in cls._fresh][:2]}
        assert _state(cls(**given)) == _state(_generic(cls, **given)), cls


def test_an_unknown_or_positional_field_is_refused():
    P = protocol.ProduceResponse.PartitionProduceResponse
    P(index=1)
    with pytest.raises(TypeError, match="PartitionProduceResponse has no field 'bogus'"):
        P(index=1, bogus=2)
    with pytest.raises(TypeError):
        P(1)
    with pytest.raises(TypeError, match="has no field '_unknown_tags'"):
        P(_unknown_tags={})
