"""Scans of v2 batches that build no record objects: ``scan_valid_v2`` (the fast path of a
log segment's recovery) and ``scan_records_v2`` (the broker's check of a produced batch).

The public face of the segscan twins (kcodec._py.segscan says what each returns); the twin
is chosen once by ``kcodec._impl`` (see ``kcodec.IMPLEMENTATION``).
"""

from kcodec._impl import IMPLEMENTATION

if IMPLEMENTATION == "cython":
    from kcodec._cy.segscan import *  # noqa: F401,F403
    from kcodec._cy.segscan import __all__  # noqa: F401
else:
    from kcodec._py.segscan import *  # noqa: F401,F403
    from kcodec._py.segscan import __all__  # noqa: F401
