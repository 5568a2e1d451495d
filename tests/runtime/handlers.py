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
                    f"{'done' if ok is True else 'failed'}\n" for r, ok in zip(records, results))
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
