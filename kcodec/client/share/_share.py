"""The share consumer's record type and its maker, from the twin the process uses
(kcodec._py.share or kcodec._cy.share)."""

from kcodec._impl import IMPLEMENTATION

if IMPLEMENTATION == "cython":
    from kcodec._cy.share import ShareRecord, share_records
else:
    from kcodec._py.share import ShareRecord, share_records

__all__ = ["ShareRecord", "share_records"]
