"""Kafka varints (unsigned, zigzag 32-bit, zigzag 64-bit): the public face.

    >>> from kcodec.varint import encode_varlong, decode_varlong
    >>> encode_varlong(-1)
    b'\\x01'
    >>> decode_varlong(b'\\x01')
    (-1, 1)

The implementation is chosen once by ``kcodec._impl`` (see ``kcodec.IMPLEMENTATION``).
"""

from kcodec._impl import IMPLEMENTATION

if IMPLEMENTATION == "cython":
    from kcodec._cy.varint import *  # noqa: F401,F403
    from kcodec._cy.varint import __all__  # noqa: F401
else:
    from kcodec._py.varint import *  # noqa: F401,F403
    from kcodec._py.varint import __all__  # noqa: F401
