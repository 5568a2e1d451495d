"""Both twins export the same public names, with the same signatures, in the same order."""

from __future__ import annotations

import inspect

import pytest

from kcodec import _impl
from tests.conftest import NO_EXT

MODULES = _impl.module_names()


def test_every_hot_module_has_a_python_twin() -> None:
    assert "varint" in MODULES


@pytest.mark.skipif(NO_EXT, reason="pure-only run: the compiled twin is not under test")
@pytest.mark.parametrize("name", MODULES)
def test_twins_export_the_same_names_and_signatures(name: str) -> None:
    py = _impl.twin(name, "python")
    cy = _impl.twin(name, "cython")
    assert list(cy.__all__) == list(py.__all__)
    for attr in py.__all__:
        p, c = getattr(py, attr), getattr(cy, attr)
        assert callable(p) == callable(c), attr
        if inspect.isfunction(p):
            assert _shape(c) == _shape(p), attr


def _shape(fn: object) -> list[tuple[str, object, object]]:
    """Parameter names, kinds and defaults; annotations are the pure twin's business."""
    return [(q.name, q.kind, q.default) for q in inspect.signature(fn).parameters.values()]
