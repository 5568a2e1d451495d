"""The type stub of kcodec.protocol (kcodec/protocol/__init__.pyi) against the real classes.

The message classes are built at import time from the generated declarations, so type
checkers and IDEs only see them through the stub. These tests keep the two in step: the stub
is what the generator makes from the committed declarations; it names every class, nested
struct class and field the runtime has, in order; the values the classes really hold (the
defaults, and what decoding gives at every version) fit the annotated types; and mypy,
where installed, accepts typed use and rejects a wrong attribute or type.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

import kcodec.protocol as protocol
from kcodec.protocol import CLASSES
from kcodec.protocol._decl import in_range
from tests.support import REPO
from tools.gen_protocol.generate import STUB_PATH, committed_decls, render_stub

ROOT = REPO


def _stub_tree() -> ast.Module:
    return ast.parse(STUB_PATH.read_text(encoding="utf-8"))


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _fields(cls: ast.ClassDef) -> dict[str, str]:
    return {n.target.id: ast.unparse(n.annotation) for n in cls.body
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}


def test_stub_is_what_the_generator_makes() -> None:
    assert STUB_PATH.exists(), "run: python -m tools.gen_protocol --stubs"
    assert STUB_PATH.read_text(encoding="utf-8") == render_stub(committed_decls()), \
        "kcodec/protocol/__init__.pyi drifted; run: python -m tools.gen_protocol --stubs"


def test_stub_check_mode_reports_drift(tmp_path: Path) -> None:
    stale = tmp_path / "stub.pyi"
    stale.write_text("# old\n", encoding="utf-8")
    run = [sys.executable, "-m", "tools.gen_protocol", "--stubs", "--stub", str(stale)]
    r = subprocess.run([*run, "--check"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "differs" in r.stderr
    assert subprocess.run(run, capture_output=True, timeout=120).returncode == 0
    assert stale.read_text(encoding="utf-8") == render_stub(committed_decls())
    r = subprocess.run([*run, "--check"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_stub_exports_what_the_package_exports() -> None:
    tree = _stub_tree()
    stub_all = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets))
    assert sorted(stub_all) == sorted(protocol.__all__)
    imported = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom)
                for a in n.names if n.module and n.module.startswith("kcodec.")}
    assert imported | set(_classes(tree)) >= set(protocol.__all__)


def test_every_class_struct_and_field_is_in_the_stub() -> None:
    stub = _classes(_stub_tree())
    assert set(stub) == set(CLASSES)
    for name, cls in CLASSES.items():
        node = stub[name]
        assert list(_fields(node)) == [f.name for f in cls.fields()], name
        nested = {n.name: n for n in node.body if isinstance(n, ast.ClassDef)}
        assert set(nested) == set(cls.STRUCTS), name
        for sname, scls in cls.STRUCTS.items():
            assert list(_fields(nested[sname])) == [f.name for f in scls.fields()], sname
            assert getattr(cls, sname) is scls


# -- do the values the classes hold fit the annotations? -----------------------------------

_SIMPLE = {"int": int, "float": float, "bool": bool, "str": str, "bytes": bytes,
           "bytearray": bytearray, "memoryview": memoryview, "UUID": uuid.UUID}


def _fits(value: Any, ann: ast.expr, owner: type) -> bool:
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        return _fits(value, ann.left, owner) or _fits(value, ann.right, owner)
    if isinstance(ann, ast.Constant) and ann.value is None:
        return value is None
    if isinstance(ann, ast.Subscript):   # list[T]
        assert isinstance(ann.value, ast.Name) and ann.value.id == "list"
        return isinstance(value, list) and all(_fits(v, ann.slice, owner) for v in value)
    if isinstance(ann, ast.Attribute):   # Message.Struct
        assert isinstance(ann.value, ast.Name) and ann.value.id == owner.__name__
        return type(value) is getattr(owner, ann.attr)
    assert isinstance(ann, ast.Name), ast.dump(ann)
    t = _SIMPLE[ann.id]
    if t is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, t)


def _check_values(obj: Any, node: ast.ClassDef, owner: type, where: str) -> None:
    anns = {n.target.id: n.annotation for n in node.body if isinstance(n, ast.AnnAssign)
            and isinstance(n.target, ast.Name)}
    nested = {n.name: n for n in _classes_of(owner)}
    for field, ann in anns.items():
        value = getattr(obj, field)
        assert _fits(value, ann, owner), f"{where}.{field} = {value!r} is not {ast.unparse(ann)}"
        for item in (value if isinstance(value, list) else [value]):
            if isinstance(item, protocol.Struct) and not isinstance(item, protocol.Message):
                _check_values(item, nested[type(item).__name__], owner,
                              f"{where}.{field}[{type(item).__name__}]")


_OWNER_NODES: dict[str, list[ast.ClassDef]] = {}


def _classes_of(owner: type) -> list[ast.ClassDef]:
    if not _OWNER_NODES:
        for name, node in _classes(_stub_tree()).items():
            _OWNER_NODES[name] = [n for n in node.body if isinstance(n, ast.ClassDef)]
    return _OWNER_NODES[owner.__name__]


def _sample(cls: type, version: int, depth: int = 0) -> Any:
    """An instance with one element in every list of structs and every nested struct
    filled in, for the fields that ``version`` has."""
    obj = cls()
    for info in cls._info:   # type: ignore[attr-defined]
        if info.struct_cls is not None and depth < 4 and in_range(version, info.versions):
            item = _sample(info.struct_cls, version, depth + 1)
            setattr(obj, info.name, [item] if info.is_array else item)
    return obj


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_values_fit_the_stub_types(name: str) -> None:
    """Defaults, and what a round trip at every valid version decodes, fit the annotations."""
    cls = CLASSES[name]
    node = _classes(_stub_tree())[name]
    _check_values(cls(), node, cls, name)
    for version in range(cls.MIN_VERSION, cls.MAX_VERSION + 1):
        decoded = cls.decode(_sample(cls, version).encode(version), version)
        _check_values(decoded, node, cls, f"{name} v{version}")


@pytest.mark.slow
def test_mypy_sees_the_fields(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy comes with the test extra")
    good = tmp_path / "good.py"
    good.write_text(
        "from kcodec.protocol import MetadataRequest, MetadataResponse\n"
        "req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name='t')])\n"
        "body: bytes = req.encode(12)\n"
        "resp = MetadataResponse.decode(b'', 12)\n"
        "ports: list[int] = [b.port for b in resp.brokers]\n"
        "leaders: list[int] = [p.leader_id for t in resp.topics for p in t.partitions]\n"
        "names: list[str | None] = [t.name for t in resp.topics]\n", encoding="utf-8")
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from kcodec.protocol import MetadataResponse\n"
        "resp = MetadataResponse.decode(b'', 12)\n"
        "x: str = resp.brokers[0].port\n"
        "resp.no_such_field\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "mypy", "--no-incremental", "--python-version", "3.10",
           "--follow-imports", "silent"]
    env_root = str(Path(protocol.__file__).resolve().parent.parent.parent)
    r = subprocess.run([*cmd, str(good)], capture_output=True, text=True, cwd=env_root,
                       timeout=300)
    assert r.returncode == 0, r.stdout
    r = subprocess.run([*cmd, str(bad)], capture_output=True, text=True, cwd=env_root,
                       timeout=300)
    assert r.returncode == 1, r.stdout
    assert 'Incompatible types in assignment (expression has type "int", variable has type ' \
           '"str")' in r.stdout
    assert '"MetadataResponse" has no attribute "no_such_field"' in r.stdout
