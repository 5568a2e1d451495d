"""kcodec: a fast, correct Apache Kafka wire codec.

``kcodec.IMPLEMENTATION`` is ``"cython"`` when the compiled twins are in use and
``"python"`` when the pure-Python twins are (``KCODEC_NO_EXTENSIONS=1``, or no build).
"""

from kcodec import errors
from kcodec._impl import IMPLEMENTATION
from kcodec._version import __version__

__all__ = ["IMPLEMENTATION", "__version__", "errors"]
