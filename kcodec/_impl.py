"""Decide ONCE which twin serves every hot module: the compiled one or the pure one.

The choice is all-or-nothing: either every module in ``kcodec._py`` has a compiled twin
in ``kcodec._cy`` that imports, and all of them are used, or none is. A C varint under a
Python record reader would make results depend on which modules happened to build.

Environment:
  KCODEC_NO_EXTENSIONS=1       use the pure-Python twins (also skips the build)
  KCODEC_REQUIRE_EXTENSIONS=1  fail at import if the compiled twins cannot be loaded
"0", "false", "no", "off" and the empty string mean off.

A face (``kcodec.varint``, ``kcodec.records.batch``...) chooses its twin one way, the twin
of its own name, at module level:

    from kcodec._impl import IMPLEMENTATION

    if IMPLEMENTATION == "cython":
        from kcodec._cy.NAME import *
    else:
        from kcodec._py.NAME import *

Twins import only twins of their own implementation and the bottom floor (errors, _limits,
_codecs, _columnar). tests/house/test_twins.py holds every module to these rules. ``twin()``
below is for tests, benchmarks and fuzzing, which load both twins side by side.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from types import ModuleType

__all__ = ["IMPLEMENTATION", "EXTENSION_ERROR", "twin", "twins", "module_names"]


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


def module_names() -> list[str]:
    """Names of the hot modules: every module of ``kcodec._py``."""
    from kcodec import _py

    return sorted(m.name for m in pkgutil.iter_modules(_py.__path__) if not m.name.startswith("_"))


def _load_compiled() -> tuple[dict[str, ModuleType], str | None]:
    loaded: dict[str, ModuleType] = {}
    for name in module_names():
        try:
            loaded[name] = importlib.import_module(f"kcodec._cy.{name}")
        except ImportError as exc:
            return {}, f"kcodec._cy.{name}: {exc}"
    return loaded, None


def _decide() -> tuple[str, str | None]:
    if _truthy("KCODEC_NO_EXTENSIONS"):
        return "python", "disabled by KCODEC_NO_EXTENSIONS"
    _, error = _load_compiled()
    if error is None:
        return "cython", None
    if _truthy("KCODEC_REQUIRE_EXTENSIONS"):
        raise ImportError(
            "kcodec: KCODEC_REQUIRE_EXTENSIONS is set but the compiled extension could not be "
            f"loaded ({error}); rebuild with `pip install --force-reinstall --no-binary kcodec "
            "kcodec` or unset the variable"
        )
    return "python", error


IMPLEMENTATION, EXTENSION_ERROR = _decide()


def twin(name: str, implementation: str | None = None) -> ModuleType:
    """The module ``name`` of the chosen twin (or of ``implementation`` if given); for tests,
    benchmarks and fuzzing (a face imports its twin with the if/else above)."""
    impl = implementation or IMPLEMENTATION
    package = "kcodec._cy" if impl == "cython" else "kcodec._py"
    return importlib.import_module(f"{package}.{name}")


def twins() -> list[str]:
    """Implementations that can be loaded in this process (for tests and benchmarks)."""
    available = ["python"]
    if _load_compiled()[1] is None:
        available.insert(0, "cython")
    return available
