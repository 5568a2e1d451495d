"""The README's quickstart handler for ``kcodec run``: prints each record, all done.

    kcodec run examples.runtime.hello:handle -t hello -g hello

A handler takes a list of ``kcodec.runtime.Message`` (topic, partition, offset, timestamp,
key, value, headers, attempts ...) and returns one result per record: True (done) or False
(failed: retried with backoff, then kept in the failed queue). Raising fails the batch.
"""

from __future__ import annotations

from kcodec.runtime import Message


def handle(records: list[Message]) -> list[bool]:
    for r in records:
        print(f"{r.topic}[{r.partition}]@{r.offset}: {r.value!r}", flush=True)
    return [True] * len(records)
