"""Legacy MessageSet v0/v1 (magic 0 and 1): ``LegacyBatch`` and ``MessageSetBuilder``.

The public face of the legacy twins (kcodec._py.legacy holds the wire layout); the twin is
chosen once by ``kcodec._impl`` (see ``kcodec.IMPLEMENTATION``). Most callers import these
names from ``kcodec.records``.
"""

from kcodec._impl import IMPLEMENTATION

if IMPLEMENTATION == "cython":
    from kcodec._cy.legacy import *  # noqa: F401,F403
    from kcodec._cy.legacy import __all__  # noqa: F401
else:
    from kcodec._py.legacy import *  # noqa: F401,F403
    from kcodec._py.legacy import __all__  # noqa: F401
