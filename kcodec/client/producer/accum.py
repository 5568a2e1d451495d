"""The producer's per-record append step: the compiled or the pure twin, as ``_impl``
decides (see kcodec._py.accum)."""

from __future__ import annotations

from kcodec._impl import IMPLEMENTATION

if IMPLEMENTATION == "cython":
    from kcodec._cy.accum import Appender
else:
    from kcodec._py.accum import Appender  # type: ignore[assignment]

__all__ = ["Appender"]
