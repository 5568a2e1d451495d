"""kcodec.testing.runtime.HandlerTest: a handler run in the test's process against the
embedded broker, by the runtime's own puller and worker (retries, failed queue, decoding)."""

from __future__ import annotations

import pytest

from kcodec.runtime import Failed, per_record
from kcodec.testing.runtime import HandlerTest


def test_a_batch_handler_with_retries_and_the_failed_queue() -> None:
    def handle(records: list) -> list:
        bad = {i: "not a number" for i, r in enumerate(records) if not r.value.isdigit()}
        if bad:
            raise Failed(bad)
        return [True] * len(records)

    with HandlerTest(handle, topics=["orders"], partitions=2, retries=1) as t:
        t.produce("orders", ["1", "2", "x", "4"], partition=0)
        t.run()
        values = sorted(m.value for m in t.handled)
        assert values == [b"1", b"2", b"4", b"x", b"x"]     # x: first delivery and one retry
        assert [(m.value, m.attempts, m.error) for m in t.failed] == \
            [(b"x", 2, "RuntimeError: not a number")]
        t.produce("orders", ["5"], partition=1)             # and again, from where it stood
        t.run()
        assert sorted(m.value for m in t.handled)[-1] == b"x" and t.handled[-1].value == b"5"


def test_a_per_record_async_handler_with_json_values() -> None:
    seen = []

    @per_record
    async def handle(msg) -> None:
        if "sku" not in msg.value:
            raise KeyError("sku")
        seen.append(msg.value["sku"])

    with HandlerTest(handle, topics=["skus"], decode="json", retries=0) as t:
        t.produce("skus", ['{"sku": 1}', '{"id": 2}', '{"sku": 3}', "not json"])
        t.run()
        assert seen == [1, 3]
        assert sorted(m.offset for m in t.failed) == [1, 3]
        assert "KeyError" in t.failed[0].error and "not JSON" in t.failed[1].error


def test_a_handler_that_never_finishes_times_out_clearly() -> None:
    def handle(records: list) -> list:
        return [False] * len(records)       # always fails: retried with backoff forever

    with HandlerTest(handle, topics=["t"], retries=1000, backoff_ms=1000) as t:
        t.produce("t", ["a"])
        with pytest.raises(TimeoutError, match="did not finish every record within 2 s"):
            t.run(timeout=2)
