"""A delivery callback added while the loop finishes its batch runs exactly once: the
check for "finished" and the append are one step against ``finish``'s swap of the list.
Before, a callback added between the user's check and the loop's walk of the list was never
called (a delivery report lost), and nothing said so."""

from __future__ import annotations

import threading

from kcodec.client.producer.batch import ProducerBatch, RecordFuture


def _batch() -> tuple[ProducerBatch, RecordFuture]:
    b = ProducerBatch("t", 0, None, 0.0, -1, None)
    b.timestamps.append(0)
    f = RecordFuture()
    f.batch, f.index = b, 0
    return b, f


def test_a_batch_finished_right_after_a_look_at_it_still_calls_the_callback() -> None:
    b, f = _batch()

    class FinishedRightAfterTheLook(threading.Event):
        """The loop's thread finishes the batch just after someone asked if it had."""
        raced = False

        def is_set(self) -> bool:
            was = super().is_set()
            if not was and not self.raced:
                self.raced = True
                b.finish(7, -1, None)
            return was
    b.event = FinishedRightAfterTheLook()
    calls: list[int] = []
    f.add_callback(lambda e, r: calls.append(r.offset))
    if not b.event.is_set():      # (not finished yet: it finishes now)
        b.finish(7, -1, None)
    assert calls == [7]


def test_callbacks_before_and_after_the_finish_each_run_once() -> None:
    b, f = _batch()
    calls: list[str] = []
    f.add_callback(lambda e, r: calls.append("before"))
    b.finish(3, -1, None)
    f.add_callback(lambda e, r: calls.append("after"))
    b.finish(3, -1, None)         # a second finish runs nothing again
    assert calls == ["before", "after"]
