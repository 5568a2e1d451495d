"""Every public name has a docstring: the API reference (docs/reference/api.md) is made from
them, so a name without one would be a blank entry there.

The public API is the ``__all__`` of the public modules below; for a class, its public
methods and Python properties count too. (A compiled class's read-only attributes are
getset descriptors that cannot be told from its computed properties; the class docstring
and the guides describe those fields, and the pure twin's properties are checked.) Constants (ints, strings, tuples, dicts,
enum members) carry no docstring of their own and are documented by their module or in the
reference page, so they are not asked for one. Run under both twins (CI runs the suite with
KCODEC_NO_EXTENSIONS=1 too), so the compiled and the pure twin are both checked.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import inspect
from typing import Any

PUBLIC_MODULES = [
    "kcodec", "kcodec.errors", "kcodec.varint", "kcodec.crc", "kcodec.compression",
    "kcodec.xerial", "kcodec.murmur", "kcodec.records", "kcodec.protocol", "kcodec.client",
    "kcodec.broker", "kcodec.compat", "kcodec.runtime", "kcodec.testing", "kcodec.spark",
]


def _documented(obj: Any) -> bool:
    doc = obj.fget.__doc__ if isinstance(obj, property) else obj.__doc__
    return bool(doc and doc.strip())


def _needs_doc(obj: Any) -> bool:
    return (inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj)
            or isinstance(obj, property))


def _own_doc(cls: type) -> bool:
    """A class's own docstring (an Enum or a dataclass without one gets a generated text
    that says nothing: those count as undocumented)."""
    doc = cls.__dict__.get("__doc__")
    if not doc or not doc.strip():
        return False
    generated = (dataclasses.is_dataclass(cls) and doc.startswith(f"{cls.__name__}(")
                 and "\n" not in doc.strip())
    return not (generated or doc == "An enumeration.")


def undocumented(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    missing = []
    if not _documented(module):
        missing.append(module_name)
    for name in getattr(module, "__all__", []):
        obj = getattr(module, name)
        if not _needs_doc(obj):
            continue
        where = f"{module_name}.{name}"
        if inspect.isclass(obj):
            if not _own_doc(obj):
                missing.append(where)
            if not (obj.__module__ or "").startswith(("kcodec", "pyspark_kcodec")):
                continue
            for attr, value in vars(obj).items():
                if attr.startswith("_") or isinstance(value, enum.Enum):
                    continue
                fn = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
                if (inspect.isroutine(fn) or isinstance(fn, property)) and not _documented(fn):
                    missing.append(f"{where}.{attr}")
        elif not _documented(obj):
            missing.append(where)
    return missing


def test_every_public_name_has_a_docstring() -> None:
    missing = []
    for module_name in PUBLIC_MODULES:
        try:
            missing += undocumented(module_name)
        except ImportError as exc:
            if module_name == "kcodec.spark" and "pyspark" in str(exc):
                continue      # kcodec.spark needs pyspark; the docs build documents it
            raise
    assert not missing, (f"{len(missing)} public names have no docstring (write a short, "
                         "true one):\n  " + "\n  ".join(missing))
