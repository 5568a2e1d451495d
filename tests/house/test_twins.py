"""The twin rules (tests/support/twin_rules.py says them): twins import only twins of their
own implementation and the bottom floor, a face chooses its twin one way and shares its name,
nothing else imports a twin. Checked on this checkout, on small trees with one planted
violation each (so the checker is seen to fail), and at run time: a twin loaded beside the
other one holds no function or class of the other implementation."""

from __future__ import annotations

import importlib
import pkgutil
import textwrap
from pathlib import Path

import pytest

from tests.conftest import IMPLS
from tests.support import REPO
from tests.support.twin_rules import BOTTOM, check

# -- this checkout -------------------------------------------------------------------------


def test_this_checkout_keeps_the_twin_rules() -> None:
    if not (REPO / "kcodec" / "_cy").is_dir():
        pytest.skip("runs from a checkout (the sources are not beside the tests here)")
    assert check(REPO) == []


@pytest.mark.parametrize("impl", IMPLS)
def test_a_twin_holds_only_its_own_implementations_code(impl: str) -> None:
    # The pure twin is what "python" means in the parity tests, which load both twins in
    # one process: a compiled CRC or snappy under the pure reader (through a face) would
    # hide the pure code's bugs, and make the twins agree where they should not.
    package = "kcodec._py" if impl == "python" else "kcodec._cy"
    allowed = (package, *BOTTOM)
    names = [m.name for m in pkgutil.iter_modules(importlib.import_module(package).__path__)]
    found = []
    for name in names:
        mod = importlib.import_module(f"{package}.{name}")
        for attr, value in vars(mod).items():
            where = getattr(value, "__name__" if isinstance(value, type(mod)) else "__module__",
                            None)
            if (isinstance(where, str) and where.startswith("kcodec.")
                    and not any(where == a or where.startswith(a + ".") for a in allowed)):
                found.append(f"{package}.{name}.{attr} comes from {where}")
    assert not found, "\n".join(found)


# -- planted violations --------------------------------------------------------------------

GOOD = {
    "kcodec/__init__.py": "",
    "kcodec/_impl.py": """
        import importlib
        IMPLEMENTATION = "python"
        def twin(name, impl):
            return importlib.import_module(f"kcodec._py.{name}")
        """,
    "kcodec/errors.py": "class KcodecError(Exception): pass\n",
    "kcodec/_limits.py": "from kcodec.errors import KcodecError\n",
    "kcodec/_codecs/__init__.py": "",
    "kcodec/_codecs/gz.py": "import zlib\nfrom kcodec._limits import KcodecError\n",
    "kcodec/_py/__init__.py": "",
    "kcodec/_py/_help.py": "from kcodec.errors import KcodecError\n",
    "kcodec/_py/foo.py": """
        from kcodec._codecs import gz
        from kcodec._py._help import KcodecError
        __all__ = ["f"]
        def f(): return gz
        """,
    "kcodec/_py/bar.py": "from kcodec._py.foo import f\n__all__ = ['g']\ng = f\n",
    "kcodec/_cy/__init__.py": "",
    "kcodec/_cy/_reader.pxd": "from libc.stdint cimport uint8_t\ncdef int get(uint8_t b)\n",
    "kcodec/_cy/foo.pyx": """
        from kcodec._cy._reader cimport (
            get,
        )
        from kcodec._codecs import gz
        __all__ = ["f"]
        def f(): return gz
        """,
    "kcodec/_cy/bar.pyx": "from kcodec._cy.foo import f\n__all__ = ['g']\ng = f\n",
    "kcodec/foo.py": """
        from kcodec._impl import IMPLEMENTATION

        if IMPLEMENTATION == "cython":
            from kcodec._cy.foo import *  # noqa
            from kcodec._cy.foo import __all__
        else:
            from kcodec._py.foo import *  # noqa
            from kcodec._py.foo import __all__
        """,
    "kcodec/sub/__init__.py": "from kcodec.sub._bar import g\n",
    "kcodec/sub/_bar.py": """
        from kcodec._impl import IMPLEMENTATION

        if IMPLEMENTATION == "python":
            from kcodec._py.bar import g
        else:
            from kcodec._cy.bar import g
        """,
    "kcodec/user.py": "from kcodec.foo import f\nfrom kcodec.sub import g\n",
}

# (what is planted, files changed (None: removed), what the checker must say)
PLANTED = [
    ("pure twin imports a face", {"kcodec/_py/foo.py": "from kcodec.user import f\n"},
     "the python twin kcodec._py.foo imports kcodec.user"),
    ("pure twin imports the compiled twin", {"kcodec/_py/bar.py": "from kcodec._cy.foo import f\n"},
     "the python twin kcodec._py.bar imports kcodec._cy.foo"),
    ("pure twin imports a face lazily", {"kcodec/_py/bar.py": """
        def g():
            from kcodec import user
            return user
        """}, "the python twin kcodec._py.bar imports kcodec.user"),
    ("compiled twin imports a face lazily", {"kcodec/_cy/bar.pyx": """
        def g():
            from kcodec.foo import f
            return f
        """}, "the cython twin kcodec._cy.bar imports kcodec.foo"),
    ("compiled twin cimports the pure twin", {"kcodec/_cy/_reader.pxd":
                                              "from kcodec._py._help cimport x\n"},
     "the cython twin kcodec._cy._reader imports kcodec._py._help"),
    ("bottom floor picks a twin", {"kcodec/_codecs/gz.py": """
        def fast():
            from kcodec._cy import foo
            return foo
        """}, "kcodec._codecs.gz (bottom floor) imports kcodec._cy.foo"),
    ("a module beside the face imports a twin", {"kcodec/user.py": "from kcodec._py.foo import f\n"},
     "kcodec.user imports kcodec._py.foo outside the if/else on IMPLEMENTATION"),
    ("a face takes another name too", {"kcodec/foo.py": GOOD["kcodec/foo.py"] + """
        def late():
            from kcodec._cy.bar import g
            return g
        """}, "kcodec.foo imports kcodec._cy.bar outside the if/else"),
    ("a face calls _impl.twin", {"kcodec/foo.py": """
                f = _impl.twin("foo").f
        """}, "kcodec.foo calls _impl.twin"),
    ("a face imports _impl.twin", {"kcodec/foo.py": """
        from kcodec._impl import twin
        f = twin("foo").f
        """}, "kcodec.foo imports kcodec._impl.twin"),
    ("a face chooses through importlib", {"kcodec/foo.py": """
        import importlib
        from kcodec._impl import IMPLEMENTATION
        f = importlib.import_module("kcodec._cy.foo").f
        """}, "names the twin module 'kcodec._cy.foo' in a string"),
    ("a face's branches import different names", {"kcodec/foo.py": """
        from kcodec._impl import IMPLEMENTATION

        if IMPLEMENTATION == "cython":
            from kcodec._cy.foo import f
        else:
            from kcodec._py.foo import f, __all__
        """}, "must import the same names of the same twin"),
    ("a face's branches import different twins", {"kcodec/foo.py": """
        from kcodec._impl import IMPLEMENTATION

        if IMPLEMENTATION == "cython":
            from kcodec._cy.bar import g
        else:
            from kcodec._py.foo import g
        """}, "must import the same names of the same twin"),
    ("a face chooses on something else", {"kcodec/foo.py": """
        import os
        if os.environ.get("PURE"):
            from kcodec._py.foo import f
        else:
            from kcodec._cy.foo import f
        """}, "kcodec.foo imports kcodec._py.foo outside the if/else on IMPLEMENTATION"),
    ("a face named otherwise", {"kcodec/foo.py": None, "kcodec/other.py": GOOD["kcodec/foo.py"]},
     "the face kcodec.other chooses the twin 'foo': a face and its twin share a name"),
    ("a package face named otherwise", {"kcodec/sub/__init__.py": GOOD["kcodec/sub/_bar.py"],
                                        "kcodec/sub/_bar.py": None},
     "the face kcodec.sub chooses the twin 'bar'"),
    ("a twin with two faces", {"kcodec/tools/foo.py": GOOD["kcodec/foo.py"]},
     "the twin 'foo' has 2 faces (kcodec.foo, kcodec.tools.foo)"),
    ("a twin with no face", {"kcodec/foo.py": None},
     "the twin 'foo' has 0 faces"),
]


def _tree(root: Path, changes: dict[str, str | None]) -> Path:
    files: dict[str, str | None] = {**GOOD, **changes}
    for rel, text in files.items():
        if text is None:
            continue
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def test_the_good_tree_keeps_the_rules(tmp_path: Path) -> None:
    assert check(_tree(tmp_path, {})) == []


@pytest.mark.parametrize("what,changes,message", PLANTED, ids=[p[0] for p in PLANTED])
def test_a_planted_violation_is_found(tmp_path: Path, what: str,
                                      changes: dict[str, str | None], message: str) -> None:
    errors = check(_tree(tmp_path, changes))
    assert any(message in e for e in errors), f"{what}: {message!r} not in {errors}"

