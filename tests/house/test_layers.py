"""The layers of kcodec, kept by a test: every module's imports (parsed, not run) point down
or within their floor, and privates stay home.

    floor 0   errors, _limits, _impl, _codecs, _version, _moved, _columnar
    floor 1   _py, _cy                                               the twins
    floor 2   varint, crc, compression, xerial, murmur, records,     the faces
              protocol, sasl, observe
    floor 3   client
    floor 4   broker, spark, compat, cli, runtime, testing,          the leaves
              __main__, and the package root (which installs the compat adapters
              KCODEC_PATCH names)

Rules: an import never names a higher floor; the broker never imports the client; a
private module or name (starting with ``_``) is imported only from inside the package that
holds it (``kcodec._impl`` by anyone in kcodec; ``kcodec.client._x`` or a ``_name`` of a
client module only by the client). The twins' own imports, and choosing a twin (floor 0
loading floor 1), follow the twins' rules (twins import only twins and the floor below;
one way to choose a twin), which the twins' own layer test checks.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support import REPO

FLOORS = {
    "kcodec": 4, "kcodec.errors": 0, "kcodec._limits": 0, "kcodec._impl": 0,
    "kcodec._codecs": 0, "kcodec._version": 0, "kcodec._moved": 0, "kcodec._columnar": 0,
    "kcodec._py": 1, "kcodec._cy": 1,
    "kcodec.varint": 2, "kcodec.crc": 2, "kcodec.compression": 2, "kcodec.xerial": 2,
    "kcodec.murmur": 2, "kcodec.records": 2, "kcodec.protocol": 2, "kcodec.sasl": 2,
    "kcodec.observe": 2,
    "kcodec.client": 3,
    "kcodec.broker": 4, "kcodec.spark": 4, "kcodec.compat": 4, "kcodec.cli": 4,
    "kcodec.runtime": 4, "kcodec.testing": 4, "kcodec.__main__": 4,
}


def floor_of(module: str) -> int | None:
    """The floor of a module: that of the longest prefix named in FLOORS (None: outside).
    The package root's floor is its own only: a new top-level module is placed explicitly."""
    parts = module.split(".")
    for n in range(len(parts), 1, -1):
        f = FLOORS.get(".".join(parts[:n]))
        if f is not None:
            return f
    return FLOORS.get(module)


def modules(root: Path) -> dict[str, Path]:
    """Module name -> file of every .py file under ``root`` (a directory holding ``kcodec``)."""
    out = {}
    for p in sorted((root / "kcodec").rglob("*.py")):
        parts = list(p.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


def imports(name: str, path: Path, known: set[str]) -> list[tuple[int, str, str | None]]:
    """(line, module imported, name imported from it or None) for every import in a module,
    relative imports resolved; ``from P import n`` of a module P.n gives that module."""
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rpartition(".")[0]
    out: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = package.split(".")
                pkg = pkg[:len(pkg) - node.level + 1]
                base = ".".join(pkg + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.append((node.lineno, sub, None) if sub in known else
                           (node.lineno, base, a.name))
    return out


def _private_home(module: str) -> str | None:
    """The package inside which ``module`` may be imported: the parent of its first private
    part (None: nothing private in its path)."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def violations(root: Path) -> list[str]:
    """Every import of the tree under ``root`` that breaks a rule, as 'file:line: why'."""
    mods = modules(root)
    known = set(mods)
    found: list[str] = []
    for name, path in mods.items():
        mine = floor_of(name)
        where = f"{path.relative_to(root)}"
        if mine is None:
            found.append(f"{where}: {name} is on no floor: place it in FLOORS")
        for line, target, attr in imports(name, path, known):
            if not _inside(target, "kcodec"):
                continue
            theirs = floor_of(target)
            twins = theirs == 1 or mine == 1          # the twins' rules, not these
            if mine is not None and theirs is not None and theirs > mine and not twins:
                found.append(f"{where}:{line}: {name} (floor {mine}) imports {target} "
                             f"(floor {theirs}): an import up")
            if _inside(name, "kcodec.broker") and _inside(target, "kcodec.client"):
                found.append(f"{where}:{line}: the broker imports the client ({target})")
            home = _private_home(target)
            if home is not None and not _inside(name, home):
                found.append(f"{where}:{line}: {name} imports {target}, private to {home}")
            if attr is not None and attr.startswith("_") and not attr.startswith("__") \
                    and target in known and not _inside(name, target.rpartition(".")[0]):
                found.append(f"{where}:{line}: {name} imports {target}.{attr}, a private name "
                             f"of another package")
    return list(dict.fromkeys(found))


def test_the_layers_hold() -> None:
    if not (REPO / "kcodec").is_dir():
        pytest.skip("runs from a checkout (the sources are not beside the tests here)")
    found = violations(REPO)
    assert not found, "imports that break the layers:\n" + "\n".join(found)
    assert len(modules(REPO)) > 150          # the walk sees the package


def _tree(tmp: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = tmp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return tmp


_CLEAN = {
    "kcodec/__init__.py": "from kcodec import errors\n",
    "kcodec/errors.py": "",
    "kcodec/_impl.py": "",
    "kcodec/_py/__init__.py": "",
    "kcodec/_py/batch.py": "from kcodec.errors import x\n",
    "kcodec/records/__init__.py": "from kcodec._impl import y\nfrom kcodec._py import batch\n",
    "kcodec/client/__init__.py": "from kcodec.client import _helper\nfrom . import net\n",
    "kcodec/client/_helper.py": "",
    "kcodec/client/net.py": "from ._helper import z\nfrom kcodec.client._helper import _w\n",
    "kcodec/broker/__init__.py": "from kcodec.records import y\n",
    "kcodec/spark/__init__.py": "import kcodec.client\nfrom kcodec.client.net import Cluster\n",
}


def test_a_clean_synthetic_tree_passes(tmp_path: Path) -> None:
    assert violations(_tree(tmp_path, _CLEAN)) == []


@pytest.mark.parametrize("rel, text, why", [
    ("kcodec/records/up.py", "from kcodec.client import Producer\n", "an import up"),
    ("kcodec/records/late.py", "def f():\n    import kcodec.client.net\n", "an import up"),
    ("kcodec/client/up.py", "from kcodec.broker import Cluster\n", "an import up"),
    ("kcodec/broker/side.py", "from kcodec.client.net import Cluster\n",
     "the broker imports the client"),
    ("kcodec/spark/priv.py", "from kcodec.client import _helper\n", "private to kcodec.client"),
    ("kcodec/spark/priv2.py", "from kcodec.client.net import _cache\n", "a private name"),
    ("kcodec/compat/rel.py", "from ..client._helper import z\n", "private to kcodec.client"),
    ("kcodec/newface.py", "", "is on no floor"),
])
def test_a_planted_violation_is_found(tmp_path: Path, rel: str, text: str, why: str) -> None:
    found = violations(_tree(tmp_path, {**_CLEAN, "kcodec/compat/__init__.py": "", rel: text}))
    assert len(found) == 1 and why in found[0] and rel in found[0], found
