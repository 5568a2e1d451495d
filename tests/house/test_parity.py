"""Both twins export the same public names, with the same signatures, in the same order."""

from __future__ import annotations

import ast
import inspect
import re

import pytest

from kcodec import _impl
from tests.conftest import NO_EXT
from tests.support import REPO

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


@pytest.mark.parametrize("name", MODULES)
def test_twins_define_their_public_names_in_the_same_order(name: str) -> None:
    """A reader goes from one twin to the other by position: the public functions and
    classes come in the same order in both sources."""
    py_src, cy_src = REPO / "kcodec" / "_py" / f"{name}.py", REPO / "kcodec" / "_cy" / f"{name}.pyx"
    if not cy_src.is_file():
        pytest.skip("runs from a checkout (the sources are not beside the tests here)")
    public = set(_impl.twin(name, "python").__all__)
    tree = ast.parse(py_src.read_text(encoding="utf-8"))
    py_order = [n.name for n in tree.body
                if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in public]
    defs = re.finditer(r"^(?:cdef class|class|def|cpdef \w+) (\w+)",
                       cy_src.read_text(encoding="utf-8"), re.MULTILINE)
    cy_order = list(dict.fromkeys(m.group(1) for m in defs if m.group(1) in public))
    assert cy_order == py_order
