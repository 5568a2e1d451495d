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

Privates stay home for attributes too: ``obj._name`` (read, written or called) of any
object but ``self``, ``cls`` or ``super()`` is a reach-in, wherever ``_name`` is defined --
in another package, another module, or another class of the reader's own module: the
object's owner gives a public seam instead. ``REACH_INS_ALLOWED`` lists the reach-ins made
on purpose, by (module, name), each with the reason (the pure twins filling the slots of an
object they make, as the compiled twins do in C; ``other._x`` of the reader's own class in
``__eq__`` or a classmethod; other libraries' privates such as a namedtuple's ``_replace``);
``REACH_IN_PACKAGES_ALLOWED`` the packages that reach in by design. An entry nothing uses
any more fails too, so the lists shrink with the code.

Every package with modules maps them in its docstring, one indented line each
(``    name.py   what it does``, ``    name/   what it holds``): a package without a map, a
module or subpackage the docstring does not name, and a map line for a name that is not
there all fail, so the map a reader opens first stays true. A generated package's map is
the ``MODULES`` list its generator writes.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support import REPO

FLOORS = {
    "kcodec": 4, "kcodec.errors": 0, "kcodec._limits": 0, "kcodec._impl": 0,
    "kcodec._codecs": 0, "kcodec._version": 0, "kcodec._moved": 0, "kcodec._columnar": 0,
    "kcodec._gc": 0,
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


_TWIN_FACTORY = ("the pure twin's factory fills the slots of the object it makes (no "
                 "__init__ per batch), as the compiled twin does in C")
_SAME_CLASS = "other._x of the reader's own class (__eq__, a classmethod building one)"
_REPLACE = "namedtuple's documented _replace"
_ARGPARSE = "argparse's, not kcodec's: no public way to walk a parser's actions"
_PYSPARK = "pyspark's: the JVM behind a session has no public handle"

# (module file, attribute) -> why: the reach-ins made on purpose.
REACH_INS_ALLOWED: dict[tuple[str, str], str] = {
    ("kcodec/_py/batch.py", "_data"): _TWIN_FACTORY,
    ("kcodec/_py/batch.py", "_end"): _TWIN_FACTORY,
    ("kcodec/_py/batch.py", "_max_size"): _TWIN_FACTORY,
    ("kcodec/_py/batch.py", "_validate"): _TWIN_FACTORY,
    ("kcodec/_py/batch.py", "_it"): _TWIN_FACTORY,
    ("kcodec/_py/legacy.py", "_key"): _TWIN_FACTORY,
    ("kcodec/_py/legacy.py", "_value"): _TWIN_FACTORY,
    ("kcodec/_py/legacy.py", "_data"): _TWIN_FACTORY,
    ("kcodec/_py/legacy.py", "_validate"): _TWIN_FACTORY,
    ("kcodec/_py/legacy.py", "_max_size"): _TWIN_FACTORY,
    ("kcodec/_py/legacy.py", "_inner"): _TWIN_FACTORY,
    ("kcodec/_py/legacy.py", "_it"): _TWIN_FACTORY,
    ("kcodec/_py/_record.py", "_tuple"): _SAME_CLASS,
    ("kcodec/_py/share.py", "_tuple"): _SAME_CLASS,
    ("kcodec/client/structs.py", "_values"): _SAME_CLASS,
    ("kcodec/protocol/_struct.py", "_values"): _SAME_CLASS,
    ("kcodec/broker/share/partition.py", "_advance"): _SAME_CLASS,
    **{("kcodec/broker/log/segment.py", name): _SAME_CLASS
       for name in ("_trusted_load", "_recover", "_use", "_add", "_rebuild_index",
                    "_open_indexes", "_write_indexes", "_index", "_tindex")},
    ("kcodec/runtime/handler.py", "_replace"): _REPLACE,
    ("kcodec/runtime/work.py", "_replace"): _REPLACE,
    ("kcodec/runtime/storage/file.py", "_replace"): _REPLACE,
    ("kcodec/runtime/storage/redis.py", "_replace"): _REPLACE,
    ("kcodec/runtime/child.py", "_exit"): "os._exit: the forked child ends without the "
                                          "parent's atexit handlers",
    ("kcodec/cli/__init__.py", "_actions"): _ARGPARSE,
    ("kcodec/cli/__init__.py", "_SubParsersAction"): _ARGPARSE,
    ("kcodec/cli/_client.py", "_ArgumentGroup"): "argparse's: the type add_argument_group "
                                                 "returns has no public name",
    ("kcodec/spark/__init__.py", "_jsparkSession"): _PYSPARK,
    ("kcodec/spark/workers.py", "_jvm"): _PYSPARK,
    ("kcodec/spark/source.py", "_getframe"): "sys._getframe: the caller's frame (no "
                                             "public way)",
}

# Packages (as a folder) whose modules reach in by design, and why.
REACH_IN_PACKAGES_ALLOWED: dict[str, str] = {
    "kcodec/compat/": "the adapters wrap other clients' privates (the seams those clients "
                      "lack)",
}


def _own_privates(tree: ast.AST) -> set[str]:
    """The private names a module defines: functions, classes, module and class-level
    names, ``self._x``/``cls._x`` attributes, slots and other ``"_x"`` strings
    (``getattr`` names), ``_x=`` keywords (argparse defaults) and import aliases."""
    names: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, (ast.Store, ast.Del)) \
                and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"):
            names.add(n.attr)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            names.add(n.target.id)
        elif isinstance(n, ast.keyword) and n.arg:
            names.add(n.arg)
        elif isinstance(n, ast.alias):
            names.add(n.asname or n.name.rpartition(".")[2])
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) \
                and n.value.isidentifier():
            names.add(n.value)
    return {x for x in names if x.startswith("_") and not x.startswith("__")}


def _reach_ins(root: Path) -> list[tuple[str, int, str, str]]:
    """(module file, line, attribute, text) of every ``obj._name`` of the tree under
    ``root`` whose ``obj`` is not ``self``, ``cls`` or ``super()``, outside the packages
    allowed."""
    found = []
    for path in modules(root).values():
        rel = path.relative_to(root).as_posix()
        if any(rel.startswith(p) for p in REACH_IN_PACKAGES_ALLOWED):
            continue
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not (isinstance(n, ast.Attribute) and n.attr.startswith("_")
                    and not n.attr.startswith("__")):
                continue
            v = n.value
            if isinstance(v, ast.Name) and v.id in ("self", "cls"):
                continue
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super":
                continue
            found.append((rel, n.lineno, n.attr, ast.unparse(n)))
    return sorted(found)


def reach_ins(root: Path) -> list[str]:
    """Every reach-in of the tree under ``root`` that ``REACH_INS_ALLOWED`` does not list,
    as 'file:line: why' (naming the modules that define the private)."""
    mods = modules(root)
    owners: dict[str, set[str]] = {}           # private name -> modules that define it
    for name, path in mods.items():
        for attr in _own_privates(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            owners.setdefault(attr, set()).add(name)
    found = []
    for rel, line, attr, text in _reach_ins(root):
        if (rel, attr) in REACH_INS_ALLOWED:
            continue
        homes = owners.get(attr)
        names = sorted(homes or ())
        whose = (f"a private of {', '.join(names[:3])}{', ...' if names[3:] else ''}"
                 if names else "another library's private")
        found.append(f"{rel}:{line}: {text} reaches into {whose}")
    return list(dict.fromkeys(found))


_NAMED_MODULE = re.compile(r"(?<![\w/.])(\w+)\.py\b")             # name.py, not a/b.py
_NAMED_PACKAGE = re.compile(r"(?<![\w/.])(\w+)/(?!\w)")            # name/, not a/b
_MAP_LINE = re.compile(r"^[ \t]+(\w+)(\.py|/)(?=\s|$)", re.M)      # '    name.py   what'


def undeclared_modules(root: Path) -> list[str]:
    """Every package of kcodec whose ``__init__.py`` docstring does not map its modules, as
    'file: why': a package with modules (``name.py``) or subpackages (``name/``) and no map
    (indented lines ``name.py   what it does``), one of them the docstring does not name, or
    a map line for a name the package does not hold. A generated package's map is its
    ``MODULES`` list, which its generator writes."""
    found = []
    for init in sorted((root / "kcodec").rglob("__init__.py")):
        rel = init.relative_to(root).as_posix()
        here = init.parent
        modules = {p.stem for p in here.glob("*.py") if p.name != "__init__.py"}
        packages = {p.name for p in here.iterdir()
                    if p.is_dir() and (p / "__init__.py").is_file()}
        if not modules and not packages:
            continue
        text = init.read_text(encoding="utf-8")
        tree = ast.parse(text)
        if "Generated — do not edit" in text.partition('"""')[0]:
            listed = _generated_modules(tree)
            found += [f"{rel}: MODULES does not name {n}" for n in sorted(modules - listed)]
            found += [f"{rel}: MODULES names {n}, which is not there"
                      for n in sorted(listed - modules)]
            continue
        doc = ast.get_docstring(tree, clean=False) or ""     # a map keeps its indent
        lines = _MAP_LINE.findall(doc)
        if not lines:
            found.append(f"{rel}: the docstring has no map of the package's modules "
                         f"(a line '    name.py   what it does' for each)")
            continue
        found += [f"{rel}: the docstring does not name {n}.py"
                  for n in sorted(modules - set(_NAMED_MODULE.findall(doc)))]
        found += [f"{rel}: the docstring does not name {n}/"
                  for n in sorted(packages - set(_NAMED_PACKAGE.findall(doc)))]
        found += [f"{rel}: the map names {n}{kind}, which is not there"
                  for n, kind in lines if n not in (modules if kind == ".py" else packages)]
    return found


def _generated_modules(tree: ast.Module) -> set[str]:
    """The names in a generated ``__init__``'s ``MODULES = [...]``."""
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "MODULES"):
            return set(ast.literal_eval(node.value))
    return set()


def test_the_layers_hold() -> None:
    if not (REPO / "kcodec").is_dir():
        pytest.skip("runs from a checkout (the sources are not beside the tests here)")
    found = violations(REPO)
    assert not found, "imports that break the layers:\n" + "\n".join(found)
    assert len(modules(REPO)) > 150          # the walk sees the package


def test_privates_stay_home_as_attributes() -> None:
    if not (REPO / "kcodec").is_dir():
        pytest.skip("runs from a checkout (the sources are not beside the tests here)")
    found = reach_ins(REPO)
    assert not found, ("reach-ins into another object's privates (give the owner a public "
                       "seam, or list it in REACH_INS_ALLOWED with the reason):\n"
                       + "\n".join(found))


def test_each_reach_in_allowed_is_still_made() -> None:
    if not (REPO / "kcodec").is_dir():
        pytest.skip("runs from a checkout (the sources are not beside the tests here)")
    made = {(rel, attr) for rel, _, attr, _ in _reach_ins(REPO)}
    stale = sorted(set(REACH_INS_ALLOWED) - made)
    assert not stale, f"REACH_INS_ALLOWED lists reach-ins no module makes: {stale}"
    for package in REACH_IN_PACKAGES_ALLOWED:
        assert (REPO / package).is_dir(), f"REACH_IN_PACKAGES_ALLOWED: no {package}"


def test_each_package_docstring_lists_its_modules() -> None:
    if not (REPO / "kcodec").is_dir():
        pytest.skip("runs from a checkout (the sources are not beside the tests here)")
    found = undeclared_modules(REPO)
    assert not found, "package docstrings that miss modules:\n" + "\n".join(found)


def test_a_planted_reach_in_is_found(tmp_path: Path) -> None:
    tree = _tree(tmp_path, {
        **_CLEAN,
        "kcodec/client/net.py": "class Conn:\n    def __init__(self):\n        self._task = 1\n"
                                "        super()._init()\n"
                                "def peek(c):\n    return c._task\n",     # same module
        "kcodec/client/ok.py": "def f(c, sys):\n    return c._task, sys._getframe\n",
        "kcodec/compat/__init__.py": "def h(c):\n    return c._task\n",   # a package allowed
        "kcodec/runtime/child.py": "def g(c, os):\n    os._exit(0)\n    return c._task\n",
    })
    found = reach_ins(tree)
    assert [x.split(": ", 1)[0] for x in found] == [
        "kcodec/client/net.py:6", "kcodec/client/ok.py:2", "kcodec/client/ok.py:2",
        "kcodec/runtime/child.py:3"], found
    assert "a private of kcodec.client.net" in found[0]
    assert "sys._getframe reaches into another library's private" in found[1]


def test_a_package_docstring_that_does_not_map_its_modules_is_found(tmp_path: Path) -> None:
    root_doc = ('"""The root.\n\n    errors.py   the errors\n    face/       a face\n'
                '    gen/        generated\n    empty/      nothing yet\n'
                '    gone.py     moved away\n"""\n')
    tree = _tree(tmp_path, {
        "kcodec/__init__.py": root_doc,
        "kcodec/errors.py": "", "kcodec/extra.py": "",
        "kcodec/face/__init__.py": '"""No map: x.py is named in prose only."""\n',
        "kcodec/face/x.py": "",
        "kcodec/gen/__init__.py": '# Generated — do not edit.\n"""Made."""\nMODULES = ["a", "b"]\n',
        "kcodec/gen/a.py": "", "kcodec/gen/c.py": "",
        "kcodec/empty/__init__.py": '"""Nothing under it, so nothing to map."""\n',
    })
    assert [x.split(": ", 1)[0] + ": " + x.split(": ", 1)[1].split(" (")[0]
            for x in undeclared_modules(tree)] == [
        "kcodec/__init__.py: the docstring does not name extra.py",
        "kcodec/__init__.py: the map names gone.py, which is not there",
        "kcodec/face/__init__.py: the docstring has no map of the package's modules",
        "kcodec/gen/__init__.py: MODULES does not name c",
        "kcodec/gen/__init__.py: MODULES names b, which is not there",
    ]


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
