"""Building v2 record batches: ``RecordBatchBuilder``, ``record_size``,
``estimate_batch_size`` and the ``RecordMetadata`` that ``append`` returns.

The public face of the builder twins (kcodec._py.builder); the twin is chosen once by
``kcodec._impl`` (see ``kcodec.IMPLEMENTATION``). Most callers import these names from
``kcodec.records``.
"""

from kcodec._impl import IMPLEMENTATION

if IMPLEMENTATION == "cython":
    from kcodec._cy.builder import *  # noqa: F401,F403
    from kcodec._cy.builder import __all__  # noqa: F401
else:
    from kcodec._py.builder import *  # noqa: F401,F403
    from kcodec._py.builder import __all__  # noqa: F401
