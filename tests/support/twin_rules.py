"""The twin rules, read from the sources (tests/house/test_twins.py runs them on this checkout and
on small trees with one planted violation each).

Words:

* a **twin** is a module of ``kcodec/_py`` (the pure twin, ``.py``) or ``kcodec/_cy`` (the
  compiled twin, ``.pyx``/``.pxd``); a module whose name starts with ``_`` is a helper of its
  twin package (``_wire``, ``_reader``...) and counts as a twin for what it may import;
* the **bottom floor** is what both twins share: ``kcodec.errors``, ``kcodec._limits``,
  ``kcodec._codecs`` (the codec libraries' wrappers) and ``kcodec._columnar`` (the result
  types of columnar decode);
* a **face** is any other module that imports a twin: it chooses one twin for the process.

The rules:

1. A twin imports only twins of its own implementation and the bottom floor (no face, no
   twin of the other implementation, nothing else of kcodec).
2. The bottom floor imports only the bottom floor.
3. A face chooses its twin one way, and only that way: at module level,

       from kcodec._impl import IMPLEMENTATION

       if IMPLEMENTATION == "cython":
           from kcodec._cy.NAME import ...
       else:
           from kcodec._py.NAME import ...

   the same names of the same NAME in both branches and nothing else in them; no other
   import of a twin anywhere in the module, no module path of a twin in a string (an
   ``importlib`` call), no ``kcodec._impl.twin`` (that one is for tests, benchmarks and
   fuzzing, which load both twins side by side and are not checked here).
4. A face and its twin share a name: the face module is ``NAME`` or ``_NAME`` (a package
   face: its package's name); every twin has exactly one face.

``kcodec._impl`` itself, which imports the compiled twins to decide, is exempt.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

BOTTOM = ("kcodec.errors", "kcodec._limits", "kcodec._codecs", "kcodec._columnar")
CHOOSER = "kcodec._impl"
TWIN_PACKAGES = {"kcodec._py": "python", "kcodec._cy": "cython"}
# Packages (besides kcodec) whose modules may not import a twin except as faces.
EXTRA_PACKAGES = ("pyspark_kcodec", "pyspark_kcodec_log", "tools")
# Packages a ``from PACKAGE import name`` may name a submodule of.
_SUBMODULE_PARENTS = ("kcodec", "kcodec._py", "kcodec._cy", "kcodec._codecs")
_PYX_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+c?import\s+(.+)|c?import\s+([\w.]+))")
_TWIN_PATH = re.compile(r"kcodec\._(?:py|cy)(?:\.\w+)*")


@dataclass
class Module:
    name: str                   # dotted
    path: Path
    where: str                  # the path from the root, for messages
    imports: list[tuple[str, int]] = field(default_factory=list)   # (module, line)
    tree: ast.Module | None = None                                  # .py files only


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def twin_impl(name: str) -> str | None:
    """"python" or "cython" for a module of a twin package (helpers included), else None."""
    for package, impl in TWIN_PACKAGES.items():
        if name.startswith(package + "."):
            return impl
    return None


def _targets(module: str | None, names: list[str]) -> list[str]:
    """The modules an import statement names (``from kcodec import _py`` names kcodec._py)."""
    if module is None:
        return []
    if module in _SUBMODULE_PARENTS:
        return [f"{module}.{n}" for n in names if n != "*"] or [module]
    return [module]


def _absolute(module: Module, level: int, target: str | None) -> str | None:
    if not level:
        return target
    parts = module.name.split(".")
    is_package = module.path.name.startswith("__init__.")
    base = parts[: len(parts) - level + (1 if is_package else 0)]
    return ".".join(base + ([target] if target else []))


def load(root: Path) -> list[Module]:
    """Every module of kcodec (and of the EXTRA_PACKAGES) under ``root``, with its imports."""
    modules = []
    for package in ("kcodec", *EXTRA_PACKAGES):
        base = root / package
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if path.suffix not in (".py", ".pyx", ".pxd") or "messages" in path.parts:
                continue
            rel = path.relative_to(root).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            mod = Module(".".join(parts), path, rel.with_suffix(path.suffix).as_posix())
            text = path.read_text(encoding="utf-8")
            if path.suffix == ".py":
                mod.tree = ast.parse(text, str(path))
                for node in ast.walk(mod.tree):
                    if isinstance(node, ast.Import):
                        mod.imports += [(a.name, node.lineno) for a in node.names]
                    elif isinstance(node, ast.ImportFrom):
                        target = _absolute(mod, node.level, node.module)
                        mod.imports += [(t, node.lineno) for t in
                                        _targets(target, [a.name for a in node.names])]
            else:
                for n, line in enumerate(text.splitlines(), 1):
                    m = _PYX_IMPORT.match(line)
                    if m and m.group(1):
                        names = [x.strip().split(" ")[0] for x in m.group(2).strip("( \\").split(",")]
                        mod.imports += [(t, n) for t in _targets(m.group(1), names)]
                    elif m:
                        mod.imports.append((m.group(3), n))
            modules.append(mod)
    return modules


def _is_twin_import(target: str) -> bool:
    return any(target.startswith(p + ".") or target == p for p in TWIN_PACKAGES)


def _check_twin(mod: Module, impl: str) -> list[str]:
    own = next(p for p, i in TWIN_PACKAGES.items() if i == impl)
    errors = []
    for target, line in mod.imports:
        if not _under(target, "kcodec") or _under(target, own):
            continue
        if any(_under(target, b) for b in BOTTOM):
            continue
        errors.append(f"{mod.where}:{line}: the {impl} twin {mod.name} imports {target} "
                      f"(a twin imports only {own} and the bottom floor: {', '.join(BOTTOM)})")
    return errors


def _check_bottom(mod: Module) -> list[str]:
    return [f"{mod.where}:{line}: {mod.name} (bottom floor) imports {target} (the bottom "
            f"floor imports only itself: {', '.join(BOTTOM)})"
            for target, line in mod.imports
            if _under(target, "kcodec") and not any(_under(target, b) for b in BOTTOM)]


def _choice(node: ast.stmt) -> tuple[str, str, list[ast.stmt], list[ast.stmt]] | None:
    """(impl, other impl, body, orelse) when ``node`` is ``if IMPLEMENTATION == "...": ... else: ...``."""
    if not isinstance(node, ast.If):
        return None
    t = node.test
    if not (isinstance(t, ast.Compare) and isinstance(t.left, ast.Name)
            and t.left.id == "IMPLEMENTATION" and len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq)
            and isinstance(t.comparators[0], ast.Constant)
            and t.comparators[0].value in ("cython", "python")):
        return None
    impl = t.comparators[0].value
    return impl, "python" if impl == "cython" else "cython", node.body, node.orelse


def _branch(stmts: list[ast.stmt], impl: str) -> tuple[str, list[tuple[str, str | None]]] | None:
    """(twin name, imported names) when every statement imports from one twin of ``impl``."""
    package = next(p for p, i in TWIN_PACKAGES.items() if i == impl)
    names: list[tuple[str, str | None]] = []
    twin = None
    for s in stmts:
        if not (isinstance(s, ast.ImportFrom) and s.level == 0 and s.module
                and s.module.startswith(package + ".") and s.module.count(".") == 2):
            return None
        this = s.module.rsplit(".", 1)[1]
        if twin not in (None, this) or this.startswith("_"):
            return None
        twin = this
        names += [(a.name, a.asname) for a in s.names]
    return (twin, sorted(names, key=str)) if twin else None


def _face_name(mod: Module) -> str:
    return mod.name.rsplit(".", 1)[-1]


def _check_face(mod: Module) -> tuple[list[str], str | None]:
    """Errors of a face, and the twin it chooses (None if it chooses none the one way)."""
    errors = []
    where = mod.where
    assert mod.tree is not None
    chosen: list[tuple[ast.If, str]] = []
    for node in mod.tree.body:
        c = _choice(node)
        if c is None:
            continue
        impl, other, body, orelse = c
        a, b = _branch(body, impl), _branch(orelse, other)
        if a is None or b is None or a[0] != b[0] or a[1] != b[1]:
            errors.append(f"{where}:{node.lineno}: {mod.name}: the if/else on IMPLEMENTATION "
                          f"must import the same names of the same twin, kcodec._cy.NAME in one "
                          f"branch and kcodec._py.NAME in the other, and nothing else")
            continue
        chosen.append((node, a[0]))  # type: ignore[arg-type]
    inside = {id(n) for node, _ in chosen for n in ast.walk(node)}
    imports_impl = any(isinstance(n, ast.ImportFrom) and n.module == CHOOSER
                       and any(a.name == "IMPLEMENTATION" for a in n.names)
                       for n in mod.tree.body)
    for node in ast.walk(mod.tree):
        if id(node) in inside:
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            targets = ([a.name for a in node.names] if isinstance(node, ast.Import)
                       else _targets(_absolute(mod, node.level, node.module),
                                     [a.name for a in node.names]))
            for t in targets:
                if _is_twin_import(t):
                    errors.append(f"{where}:{node.lineno}: {mod.name} imports {t} outside the "
                                  f"if/else on IMPLEMENTATION (the one way a face chooses a twin)")
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and _TWIN_PATH.fullmatch(node.value)):
            errors.append(f"{where}:{node.lineno}: {mod.name} names the twin module "
                          f"{node.value!r} in a string (choose a twin with the if/else on "
                          f"IMPLEMENTATION, not importlib)")
    errors += _twin_helper_uses(mod)
    if chosen and not imports_impl:
        errors.append(f"{where}: {mod.name} chooses a twin without "
                      f"`from kcodec._impl import IMPLEMENTATION`")
    if len(chosen) > 1:
        errors.append(f"{where}: {mod.name} chooses {len(chosen)} twins "
                      f"({', '.join(n for _, n in chosen)}): a face chooses one")
    twin = chosen[0][1] if len(chosen) == 1 else None
    if twin is not None and _face_name(mod) not in (twin, "_" + twin):
        errors.append(f"{where}: the face {mod.name} chooses the twin {twin!r}: a face and its "
                      f"twin share a name (name the face {twin} or _{twin}, or the twin "
                      f"{_face_name(mod).lstrip('_')})")
    return errors, twin


def _twin_helper_uses(mod: Module) -> list[str]:
    """Uses of kcodec._impl.twin (imported by name, or called as an attribute of _impl)."""
    assert mod.tree is not None
    out = []
    for node in ast.walk(mod.tree):
        if (isinstance(node, ast.ImportFrom) and node.module == CHOOSER
                and any(a.name == "twin" for a in node.names)):
            out.append(f"{mod.where}:{node.lineno}: {mod.name} imports kcodec._impl.twin "
                       f"(for tests, benchmarks and fuzzing; a face uses the if/else on "
                       f"IMPLEMENTATION)")
        if (isinstance(node, ast.Attribute) and node.attr == "twin"
                and isinstance(node.value, ast.Name) and node.value.id == "_impl"):
            out.append(f"{mod.where}:{node.lineno}: {mod.name} calls _impl.twin (for "
                       f"tests, benchmarks and fuzzing; a face uses the if/else on "
                       f"IMPLEMENTATION)")
    return out


def check(root: Path) -> list[str]:
    """Every violation of the rules in the tree at ``root`` (empty when it keeps them)."""
    modules = load(root)
    errors: list[str] = []
    faces: dict[str, list[str]] = {}
    for mod in modules:
        impl = twin_impl(mod.name)
        if impl is not None:
            errors += _check_twin(mod, impl)
        elif any(_under(mod.name, b) for b in BOTTOM):
            errors += _check_bottom(mod)
        elif mod.name == CHOOSER or mod.tree is None:
            continue
        else:
            uses_twin = (any(_is_twin_import(t) for t, _ in mod.imports)
                         or bool(_twin_helper_uses(mod))
                         or any(isinstance(n, ast.Constant) and isinstance(n.value, str)
                                and _TWIN_PATH.fullmatch(n.value) for n in ast.walk(mod.tree)))
            if uses_twin:
                errs, twin = _check_face(mod)
                errors += errs
                if twin is not None:
                    faces.setdefault(twin, []).append(mod.name)
    for twin in twin_names(root):
        found = faces.get(twin, [])
        if len(found) != 1:
            errors.append(f"the twin {twin!r} has {len(found)} faces"
                          f"{' (' + ', '.join(found) + ')' if found else ''}: it needs exactly "
                          f"one, named {twin} or _{twin}, choosing it the one way")
    return errors


def twin_names(root: Path) -> list[str]:
    """The twins: every module of kcodec/_py but its helpers (as kcodec._impl lists them)."""
    return sorted(p.stem for p in (root / "kcodec" / "_py").glob("*.py")
                  if not p.stem.startswith("_"))
