"""Handlers the runtime's tests run (imported by name in the runtime's processes).

``record`` appends "topic partition offset attempts pid outcome" per record to
$KCODEC_TEST_LOG (one write per batch, O_APPEND) and answers as $KCODEC_TEST_MODE says:

    ok           every record done
    fail-odd     False for odd offsets (they retry, then fail for good)
    raise        raises on every batch
    wrong-count  returns one result too few
    not-bool     returns "yes" for each record
    hang         sleeps an hour on a batch of first deliveries (retries go through)
    slow         sleeps $KCODEC_TEST_SLEEP seconds per batch (default 0.05)
    leak         keeps 20 MB per batch, taking 0.3 s each (for the RSS limit)
"""

from __future__ import annotations

import asyncio
import os
import time

_MODE = os.environ.get("KCODEC_TEST_MODE", "ok")
_LOG = os.environ.get("KCODEC_TEST_LOG", "")
_kept: list[bytes] = []
_calls = [0]


def _write(records: list, results: list) -> None:
    if not _LOG:
        return
    lines = "".join(f"{r.topic} {r.partition} {r.offset} {r.attempts} {os.getpid()} "
                    f"{'done' if ok is True else 'failed'}\n" for r, ok in zip(records, results, strict=False))
    fd = os.open(_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, lines.encode())
    finally:
        os.close(fd)


def record(records: list) -> list:
    _calls[0] += 1
    mode = _MODE
    if mode == "hang" and all(r.attempts == 0 for r in records):
        time.sleep(3600)
    if mode == "slow":
        time.sleep(float(os.environ.get("KCODEC_TEST_SLEEP", "0.05")))
    if mode == "leak":
        _kept.append(b"\x01" * (20 << 20))   # written, so resident
        time.sleep(0.3)
    results: list = [True] * len(records)
    if mode == "fail-odd":
        results = [r.offset % 2 == 0 for r in records]
    _write(records, results if mode not in ("raise", "wrong-count", "not-bool")
           else [False] * len(records))
    if mode == "raise":
        raise RuntimeError("the test handler fails on purpose")
    if mode == "wrong-count":
        return results[:-1]
    if mode == "not-bool":
        return ["yes"] * len(records)
    return results


async def record_async(records: list) -> list:
    await asyncio.sleep(0)
    if _MODE == "hang":
        await asyncio.sleep(3600)
    return record(records)


def values(records: list) -> list:
    """Writes each value (decoded by --decode) as repr; all done."""
    if _LOG:
        with open(_LOG, "a") as f:
            for r in records:
                f.write(f"{r.topic} {r.partition} {r.offset} {r.attempts} {os.getpid()} "
                        f"{type(r.value).__name__}:{r.value!r}\n")
    return [True] * len(records)


def one(record) -> None:
    """Per record (``--handle record``): logs it; raises on its first delivery when its
    offset is a multiple of 25 (the retry goes through)."""
    bad = record.offset % 25 == 0 and record.attempts == 0
    _write([record], [not bad])
    if bad:
        raise ValueError(f"offset {record.offset} fails once on purpose")


def some(records: list) -> list:
    """A batch handler failing single records: raises Failed naming the first deliveries
    whose offset is a multiple of 25; the rest of the batch is done."""
    from kcodec.runtime import Failed

    bad = {i: f"offset {r.offset} once" for i, r in enumerate(records)
           if r.offset % 25 == 0 and r.attempts == 0}
    _write(records, [i not in bad for i in range(len(records))])
    if bad:
        raise Failed(bad)
    return [True] * len(records)


def gc_state(records: list) -> list:
    """Writes "pid frozen-object-count young-threshold" per batch to $KCODEC_TEST_LOG: the
    garbage collector's set-up in the process that runs the handler; all done."""
    import gc

    if _LOG:
        with open(_LOG, "a") as f:
            f.write(f"{os.getpid()} {gc.get_freeze_count()} {gc.get_threshold()[0]}\n")
    return [True] * len(records)
