"""kcodec: a fast, correct Apache Kafka wire codec.

``kcodec.IMPLEMENTATION`` is ``"cython"`` when the compiled twins are in use and
``"python"`` when the pure-Python twins are (``KCODEC_NO_EXTENSIONS=1``, or no build).

The choice (``kcodec._impl``, which loads every compiled twin) is made when a module that
needs it is first imported, or ``IMPLEMENTATION`` is first read: ``import kcodec`` alone
stays cheap, so ``kcodec --version`` starts at once. With ``KCODEC_REQUIRE_EXTENSIONS`` set
it is made here, so that a missing build fails the import.
"""

from __future__ import annotations

import os as _os
from typing import Any

from kcodec._version import __version__

__all__ = ["IMPLEMENTATION", "__version__", "errors"]


def __getattr__(name: str) -> Any:
    if name == "IMPLEMENTATION":
        from kcodec._impl import IMPLEMENTATION

        return IMPLEMENTATION
    if name == "errors":
        import kcodec.errors

        return kcodec.errors
    raise AttributeError(f"module 'kcodec' has no attribute {name!r}")


def _patch_from_env() -> None:
    """``KCODEC_PATCH=kafka_python,aiokafka``: install those adapters now (see kcodec.compat).
    A listed peer that is missing or of an unsupported version fails the import loudly."""
    names = [n for n in _os.environ.get("KCODEC_PATCH", "").replace(";", ",").split(",")
             if n.strip()]
    if names:
        from kcodec import compat

        compat.install(*names)


if _os.environ.get("KCODEC_REQUIRE_EXTENSIONS", "").strip().lower() not in (
        "", "0", "false", "no", "off"):
    import kcodec._impl  # noqa: F401  (fails the import when the build is missing)
_patch_from_env()
