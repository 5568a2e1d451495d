"""The producer's record accumulator core: the compiled or the pure twin, as ``_impl``
decides (see kcodec._py.accum); kcodec.client.producer.accumulator builds on it."""

from __future__ import annotations

from kcodec._impl import IMPLEMENTATION

if IMPLEMENTATION == "cython":
    from kcodec._cy.accum import Accumulator
else:
    from kcodec._py.accum import Accumulator  # type: ignore[assignment]

__all__ = ["Accumulator"]
