"""murmur2 as the Java client computes it, and the partition it gives a key: the public face.

    >>> from kcodec.murmur import murmur2, partition_for_key
    >>> murmur2(b"kafka")
    -798503068
    >>> partition_for_key(b"kafka", 12)
    4

``partition_for_key(key, n)`` is ``(murmur2(key) & 0x7fffffff) % n``, the partition of the
Java client's default partitioner (and of librdkafka's ``murmur2_random``); see
``kcodec._py.murmur``. The implementation is chosen once by ``kcodec._impl`` (see
``kcodec.IMPLEMENTATION``).
"""

from kcodec._impl import IMPLEMENTATION

if IMPLEMENTATION == "cython":
    from kcodec._cy.murmur import *  # noqa: F401,F403
    from kcodec._cy.murmur import __all__  # noqa: F401
else:
    from kcodec._py.murmur import *  # noqa: F401,F403
    from kcodec._py.murmur import __all__  # noqa: F401
