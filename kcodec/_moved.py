"""Old module paths kept importable after a move, with a DeprecationWarning.

A package that moved modules registers ``{old path: new path}`` with ``install``; importing
an old path then gives the new module itself (the same object: patching one patches the
other) and warns, naming the new path. ``MOVED`` holds every registration.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Any

__all__ = ["MOVED", "install"]

MOVED: dict[str, str] = {}


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old paths of ``MOVED`` and loads them as their new modules."""

    def __init__(self) -> None:
        self._specs: dict[str, Any] = {}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: Any) -> ModuleType:
        new = MOVED[spec.name]
        # stacklevel 2: the importer (warnings skips the import machinery's frames)
        warnings.warn(f"{spec.name} is deprecated: the module moved to {new}",
                      DeprecationWarning, stacklevel=2)
        module = importlib.import_module(new)
        self._specs[new] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system has just set the old path's spec on the module: give it back
        # its own (its real name)
        module.__spec__ = self._specs[module.__name__]


_FINDER = _MovedFinder()


def install(moved: dict[str, str]) -> None:
    """Make the old paths of ``moved`` ({old: new}) import as their new modules."""
    MOVED.update(moved)
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
