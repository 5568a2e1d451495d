"""Many runtime messages in columns (a store's chunk): the face of the msgcols twins
(kcodec._py.msgcols says the layout), chosen once by ``kcodec._impl``;
kcodec.runtime.message builds its ``encode_many``/``decode_many`` on it."""

from kcodec._impl import IMPLEMENTATION

if IMPLEMENTATION == "cython":
    from kcodec._cy.msgcols import *  # noqa: F401,F403
    from kcodec._cy.msgcols import __all__  # noqa: F401
else:
    from kcodec._py.msgcols import *  # noqa: F401,F403
    from kcodec._py.msgcols import __all__  # noqa: F401
