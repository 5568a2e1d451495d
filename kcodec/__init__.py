"""kcodec: a fast, correct Apache Kafka wire codec.

``kcodec.IMPLEMENTATION`` is ``"cython"`` when the compiled twins are in use and
``"python"`` when the pure-Python twins are (``KCODEC_NO_EXTENSIONS=1``, or no build).
"""

from kcodec import errors
from kcodec._impl import IMPLEMENTATION
from kcodec._version import __version__

__all__ = ["IMPLEMENTATION", "__version__", "errors"]


def _patch_from_env() -> None:
    """``KCODEC_PATCH=kafka_python,aiokafka``: install those adapters now (see kcodec.compat).
    A listed peer that is missing or of an unsupported version fails the import loudly."""
    import os

    names = [n for n in os.environ.get("KCODEC_PATCH", "").replace(";", ",").split(",")
             if n.strip()]
    if names:
        from kcodec import compat

        compat.install(*names)


_patch_from_env()
