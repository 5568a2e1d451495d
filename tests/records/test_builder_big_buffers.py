"""Builders whose buffers pass 64 KiB: the compiled twin's buffer then moves to kcbuf's
blocks (kept with their pages between builders) and must give the pure twin's bytes, batch
after batch, through growth, a builder dropped unbuilt, and one built twice."""

from __future__ import annotations

import pytest


def _v2(mod, codec: int) -> list[bytes]:
    out = []
    for n, size in enumerate([70_000, 1_500_000, 200, 3_000_000, 900_000]):
        b = mod.RecordBatchBuilder(compression=codec, max_size=size + 10_000, base_offset=n)
        i = 0
        while b.size < size:
            value = bytes([i % 251]) * (1 + (i * 37) % 3000)
            if b.append(b"k%d" % i, value, [("h", b"x" * (i % 5))], 1_700_000_000_000 + i) \
                    is None:
                break
            i += 1
        out.append(b.build())
        if n == 1:
            out.append(b.build())            # twice: the same bytes
        dropped = mod.RecordBatchBuilder(max_size=1 << 21)
        for j in range(200):
            dropped.append(b"d", b"z" * 1000, None, j)
        del dropped                          # grown past 64 KiB, never built
    return out


@pytest.mark.parametrize("codec", [0, 3])
def test_v2_batches_past_64k_match_the_pure_twin(pair, codec) -> None:
    got = [_v2(m, codec) for m in pair("builder")]
    assert got[0] == got[1]
    assert got[0][1] == got[0][2]
    assert codec or len(got[0][4]) > 2_900_000


def _legacy(mod) -> list[bytes]:
    out = []
    for magic in (0, 1):
        for size in (100_000, 2_000_000):
            b = mod.MessageSetBuilder(magic=magic, max_size=size + 10_000)
            i = 0
            while b.append(b"k", b"v" * (1 + i % 2000), 1_700_000_000_000 + i) is not None \
                    and i < 5000:
                i += 1
            out.append(b.build())
    return out


def test_legacy_message_sets_past_64k_match_the_pure_twin(pair) -> None:
    got = [_legacy(m) for m in pair("legacy")]
    assert got[0] == got[1]
    assert max(len(x) for x in got[0]) > 1_000_000
