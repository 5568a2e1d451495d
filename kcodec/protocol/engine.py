"""The plan interpreter chosen by ``kcodec._impl``: ``encode_struct`` and ``decode_struct``.

    encode_struct(plan, obj) -> bytes
    decode_struct(plan, buf, pos=0, exact=True) -> (obj, next_pos)

Most code wants ``Message.encode``/``Message.decode`` instead.
"""

from kcodec._impl import IMPLEMENTATION

if IMPLEMENTATION == "cython":
    from kcodec._cy.engine import *  # noqa: F401,F403
    from kcodec._cy.engine import __all__  # noqa: F401
else:
    from kcodec._py.engine import *  # noqa: F401,F403
    from kcodec._py.engine import __all__  # noqa: F401
