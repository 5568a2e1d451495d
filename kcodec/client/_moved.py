"""The client's old module paths, still importable with a DeprecationWarning.

The client was split by role (``net/``, ``consumer/``, ``producer/``); ``MOVED`` maps each
module path it had before to where that module lives now. Importing an old path gives the
new module itself (the same object: patching one patches the other) and warns once, naming
the new path. ``install()`` puts the finder on ``sys.meta_path``; kcodec.client calls it.
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

MOVED = {
    "kcodec.client.core": "kcodec.client.net.core",
    "kcodec.client.conn": "kcodec.client.net.conn",
    "kcodec.client.cluster": "kcodec.client.net.cluster",
    "kcodec.client._wire": "kcodec.client.net.wire",
    "kcodec.client._sync": "kcodec.client.net.loop",
    "kcodec.client.security": "kcodec.client.net.security",
    "kcodec.client.sasl": "kcodec.client.net.sasl",
    "kcodec.client.group": "kcodec.client.consumer.classic_group",
    "kcodec.client.consumer_group": "kcodec.client.consumer.consumer_group",
    "kcodec.client.assignors": "kcodec.client.consumer.assignors",
    "kcodec.client.fetch_session": "kcodec.client.consumer.fetch_session",
    "kcodec.client.transactions": "kcodec.client.producer.transactions",
    "kcodec.client.partitioner": "kcodec.client.producer.partitioner",
    "kcodec.client._columnar_send": "kcodec.client.producer.columnar",
    "kcodec.client._accum": "kcodec.client.producer.accum",
}


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


def install() -> None:
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
