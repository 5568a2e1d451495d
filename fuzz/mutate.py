"""A small deterministic mutator (for the smoke test and the hypothesis run; libFuzzer has its own).

Mutations aim at what breaks binary decoders: flipped bits, boundary bytes, length and count
fields overwritten with boundary int32/varint values, cut tails, inserted and deleted runs.
The option bytes at the front of a seed (see ``fuzz.targets``) are mutated too, so the
function and flags change as well.
"""

from __future__ import annotations

import random
import struct

__all__ = ["mutate", "mutants"]

_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE, 0x40, 0x3F)
_INT32 = (-1, 0, 1, 0x7FFFFFFF, -0x80000000, 0x10000, 49, 61, 14, 22)
_VARINTS = (b"\x01", b"\x03", b"\xff\xff\xff\xff\x0f", b"\xfe\xff\xff\xff\x0f",
            b"\x80\x80\x80\x80\x80\x01", b"\xff" * 10 + b"\x01", b"\x80")


def mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3, 6))):
        op = rng.randrange(8)
        n = len(b)
        if op == 0 and n:                                  # flip a bit
            i = rng.randrange(n)
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1 and n:                                # a boundary byte
            b[rng.randrange(n)] = rng.choice(_BYTES)
        elif op == 2 and n >= 4:                           # a boundary int32 (big-endian)
            i = rng.randrange(n - 3)
            struct.pack_into(">i", b, i, rng.choice(_INT32))
        elif op == 3 and n:                                # a boundary varint
            i = rng.randrange(n)
            b[i:i + 1] = rng.choice(_VARINTS)
        elif op == 4 and n:                                # cut the tail
            del b[rng.randrange(n):]
        elif op == 5 and n:                                # delete a run
            i = rng.randrange(n)
            del b[i:i + rng.randrange(1, 9)]
        elif op == 6:                                      # insert random bytes
            i = rng.randrange(n + 1)
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
        elif op == 7 and n >= 2:                           # duplicate a chunk
            i = rng.randrange(n)
            j = min(n, i + rng.randrange(1, 64))
            k = rng.randrange(n + 1)
            b[k:k] = b[i:j]
    return bytes(b)


def mutants(seeds: list[bytes], count: int, seed: int) -> list[bytes]:
    """``count`` mutants of ``seeds``, the same for the same ``seed``; the seeds come first."""
    rng = random.Random(seed)
    out = list(seeds[:count])
    while len(out) < count:
        out.append(mutate(rng.choice(seeds), rng))
    return out
