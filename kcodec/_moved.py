"""Old module paths kept importable after a move, with a DeprecationWarning.

A package that moved modules registers ``{old path: new path}`` with ``install``; importing
an old path then gives the new module itself (the same object: patching one patches the
other) and warns, naming the new path and the release that drops the old one. ``MOVED``
holds every registration, ``REMOVED_IN`` the release each old path goes in. Only public
paths are kept this way: a private module (``_name``) was never an API.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Any

__all__ = ["MOVED", "REMOVED_IN", "install"]

MOVED: dict[str, str] = {}
REMOVED_IN: dict[str, str] = {}


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
        warnings.warn(f"{spec.name} is deprecated: the module moved to {new}; the old path "
                      f"goes in kcodec {REMOVED_IN[spec.name]}", DeprecationWarning, stacklevel=2)
        module = importlib.import_module(new)
        self._specs[new] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system has just set the old path's spec on the module: give it back
        # its own (its real name)
        module.__spec__ = self._specs[module.__name__]


_FINDER = _MovedFinder()


def install(moved: dict[str, str], removed_in: str) -> None:
    """Make the old paths of ``moved`` ({old: new}) import as their new modules, until
    the release ``removed_in``."""
    private = [old for old in moved if any(part.startswith("_") for part in old.split("."))]
    if private:
        raise ValueError(f"private module paths are not kept after a move: {private}")
    MOVED.update(moved)
    REMOVED_IN.update(dict.fromkeys(moved, removed_in))
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
