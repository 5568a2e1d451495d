"""A produced batch may decompress to at most 256 times its size (at least 8 MiB): a 1 GiB
zstd bomb in a few KiB is refused after at most that much work, a well-compressed real
batch is accepted."""

from __future__ import annotations

import time

import pytest

from kcodec.broker.log import LogConfig
from kcodec.broker.log.errors import CorruptMessage
from kcodec.broker.log.validate import MIN_DECOMPRESSED_LIMIT, decompressed_limit, validate
from kcodec.records import RecordBatchBuilder

NOW = 1_700_000_000_000
ZSTD, GZIP = 4, 1


def _batch(codec: int, value_bytes: int) -> bytes:
    b = RecordBatchBuilder(compression=codec)
    b.append(None, bytes(value_bytes), [], NOW)
    return bytes(b.build())


@pytest.mark.parametrize("codec", [ZSTD, GZIP])
def test_a_bomb_is_refused_after_bounded_work(codec):
    bomb = _batch(codec, 64 << 20)            # 64 MiB of zeros in a few KiB
    assert len(bomb) < 256 << 10
    t = time.monotonic()
    with pytest.raises(CorruptMessage) as err:
        validate(bomb, 0, NOW, LogConfig())
    took = time.monotonic() - t
    assert "exceed the limit" in str(err.value)
    assert took < 2.0, took


def test_a_well_compressed_batch_is_accepted():
    ok = _batch(ZSTD, 4 << 20)                 # 4 MiB of zeros: past 256x, under 8 MiB
    assert len(ok) * 256 < 4 << 20
    assert validate(ok, 0, NOW, LogConfig()).result.record_count == 1


def test_the_limit():
    assert decompressed_limit(10) == MIN_DECOMPRESSED_LIMIT
    assert decompressed_limit(1 << 20) == 100 << 20      # never past DEFAULT_MAX_SIZE
    assert decompressed_limit(64 << 10) == 16 << 20
