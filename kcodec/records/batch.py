"""Reading records blobs: ``iter_batches``, ``RecordBatch`` (magic 2), ``Record``.

The public face of the batch twins (kcodec._py.batch holds the wire layout); the twin is
chosen once by ``kcodec._impl`` (see ``kcodec.IMPLEMENTATION``). Most callers import these
names from ``kcodec.records``.
"""

from kcodec._impl import IMPLEMENTATION

if IMPLEMENTATION == "cython":
    from kcodec._cy.batch import *  # noqa: F401,F403
    from kcodec._cy.batch import __all__  # noqa: F401
else:
    from kcodec._py.batch import *  # noqa: F401,F403
    from kcodec._py.batch import __all__  # noqa: F401
