"""CRC-32C (Castagnoli) and CRC-32 (IEEE): the public face.

    >>> from kcodec.crc import crc32c, crc32
    >>> hex(crc32c(b"123456789"))
    '0xe3069283'
    >>> crc32c(b"6789", crc32c(b"12345")) == crc32c(b"123456789")
    True
    >>> hex(crc32(b"123456789"))
    '0xcbf43926'

``CRC32C_BACKEND`` names the CRC-32C code actually running: "sse4.2", "armv8-crc" or
"table" for the compiled twin; "crc32c-package (hardware)" or "(software)" for the pure
one. The implementation is chosen once by ``kcodec._impl`` (see ``kcodec.IMPLEMENTATION``).
"""

from kcodec._impl import IMPLEMENTATION

if IMPLEMENTATION == "cython":
    from kcodec._cy.crc import *  # noqa: F401,F403
    from kcodec._cy.crc import __all__  # noqa: F401
else:
    from kcodec._py.crc import *  # noqa: F401,F403
    from kcodec._py.crc import __all__  # noqa: F401
