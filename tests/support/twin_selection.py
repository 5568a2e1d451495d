"""What the pure-twin pass runs, and the check that it still reaches every twin.

CI runs the whole suite once with the compiled twins (every codec test there runs both twins
side by side, through the ``impl``/``twin``/``pair`` fixtures). The second pass, with
``KCODEC_NO_EXTENSIONS=1``, puts the pure twins under everything that goes through a face:
it runs the tests marked ``twins`` (``-m "twins and not slow"``). A test is marked

* by its folder: every test under one of :data:`TWIN_DIRS` (the codec, records, protocol,
  fuzz, compat and client tests, the broker's log and API handlers: the code that decodes
  and encodes through the faces), marked by ``tests/conftest.py`` at collection;
* or by its module (``pytestmark = pytest.mark.twins``) anywhere else.

:func:`unreached` is the check (tests/house/test_twin_selection.py runs it on this checkout
and on a small tree with a planted gap): every twin must be reached by a selected test
module, through the imports of kcodec and ``tests.support`` modules that its own imports
lead to (a face imports its twin; a twin may import another). A new twin that no selected test reaches, or a folder dropped from the list that
was the only one reaching a twin, fails it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.twin_rules import twin_names

#: folders (relative to ``tests``) whose tests the pure-twin pass runs
TWIN_DIRS = (
    "codec", "records", "protocol", "fuzz", "compat", "client", "broker/log", "broker/apis",
)


def in_twin_dirs(relpath: str, dirs: tuple[str, ...] = TWIN_DIRS) -> bool:
    """True for a test file (``tests/...``, posix) inside one of ``dirs``."""
    return any(relpath.startswith(f"tests/{d}/") for d in dirs)


def _module_of(root: Path, name: str) -> Path | None:
    base = root.joinpath(*name.split("."))
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


def _imports(tree: ast.Module, name: str, is_package: bool, module_level: bool) -> set[str]:
    """Modules named by the imports of a module (only those run at import when
    ``module_level``: function bodies left out), ``from P import n`` giving both P and P.n."""
    out: set[str] = set()

    def absolute(level: int, target: str | None) -> str:
        if not level:
            return target or ""
        parts = name.split(".")
        base = parts[: len(parts) - level + (1 if is_package else 0)]
        return ".".join(base + ([target] if target else []))

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = absolute(node.level, node.module)
                out.add(base)
                out.update(f"{base}.{a.name}" for a in node.names if a.name != "*")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if not module_level:
                    visit(node.body)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    visit([n for n in getattr(node, field, []) if isinstance(n, ast.AST)])

    visit(tree.body)
    return out


def _module_imports(root: Path, name: str, cache: dict[str, set[str]]) -> set[str]:
    if name not in cache:
        path = _module_of(root, name)
        if path is None:
            cache[name] = set()
        else:
            tree = ast.parse(path.read_text(encoding="utf-8"))
            # what a function of the module imports when called counts (the protocol's
            # engine is imported by the encode and decode methods), except in the package
            # root, whose one such import installs the compat adapters KCODEC_PATCH names
            cache[name] = _imports(tree, name, path.name == "__init__.py",
                                   module_level=name == "kcodec")
    return cache[name]


def reached(root: Path, test_file: Path, cache: dict[str, set[str]] | None = None) -> set[str]:
    """Every kcodec module a test module imports, with what those import, transitively
    (through ``tests.support`` helpers too; a module's packages count as imported)."""
    cache = {} if cache is None else cache
    seen: set[str] = set()
    tree = ast.parse(test_file.read_text(encoding="utf-8"))
    todo = list(_imports(tree, "tests._", False, module_level=False))
    while todo:
        name = todo.pop()
        if name in seen or not name.startswith(("kcodec", "tests.support")):
            continue
        seen.add(name)
        todo += _module_imports(root, name, cache)
        parts = name.split(".")
        todo += [".".join(parts[:n]) for n in range(1, len(parts))]
    return seen


def marked(test_file: Path) -> bool:
    """True when the module marks itself ``twins`` (``pytestmark = ...mark.twins...``)."""
    tree = ast.parse(test_file.read_text(encoding="utf-8"))
    for node in tree.body:
        if (isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)):
            if any(isinstance(n, ast.Attribute) and n.attr == "twins"
                   for n in ast.walk(node.value)):
                return True
    return False


def selected(root: Path, dirs: tuple[str, ...] = TWIN_DIRS) -> list[Path]:
    """The test modules of the pure-twin pass in the tree at ``root``."""
    tests = root / "tests"
    return [p for p in sorted(tests.rglob("test_*.py"))
            if in_twin_dirs(p.relative_to(root).as_posix(), dirs) or marked(p)]


def unreached(root: Path, dirs: tuple[str, ...] = TWIN_DIRS) -> list[str]:
    """The twins no selected test module reaches (empty: all are reached). A twin is
    reached through its face, or through another twin that imports it (the compression
    twin imports the xerial twin)."""
    want = set(twin_names(root))
    cache: dict[str, set[str]] = {}
    for test_file in selected(root, dirs):
        got = reached(root, test_file, cache)
        want -= {t for t in want if f"kcodec._py.{t}" in got}
        if not want:
            break
    return sorted(want)
