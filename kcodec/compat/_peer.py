"""What the adapters need from the hot paths (``remap_errors``, ``DefaultRecordMetadata``):
the face of the peer twins (kcodec._py.peer says what each does), chosen once by
``kcodec._impl`` (see ``kcodec.IMPLEMENTATION``)."""

from kcodec._impl import IMPLEMENTATION

if IMPLEMENTATION == "cython":
    from kcodec._cy.peer import *  # noqa: F401,F403
    from kcodec._cy.peer import __all__  # noqa: F401
else:
    from kcodec._py.peer import *  # noqa: F401,F403
    from kcodec._py.peer import __all__  # noqa: F401
