"""Committed offsets survive a kill -9 of ``kcodec broker --data-dir``: each commit is
written to ``consumer_offsets.jsonl`` before it is answered (the OS holds it once the
process dies), so a restarted broker answers OffsetFetch with them."""

from __future__ import annotations

import time

from kcodec.client import Admin, Consumer, TopicPartition
from tests.runtime.support import Broker, produce


def test_committed_offsets_survive_kill_minus_nine() -> None:
    b = Broker(partitions=2)
    try:
        produce(b.bootstrap, "kept", 10, partitions=2)
        want = {TopicPartition("kept", 0): 3, TopicPartition("kept", 1): 7}
        with Consumer(bootstrap_servers=b.bootstrap, group_id="g-kept",
                      enable_auto_commit=False) as c:
            c.assign(list(want))
            c.commit(want)
        b.kill()
        time.sleep(0.2)
        b.start()
        with Admin(bootstrap_servers=b.bootstrap) as a:
            assert a.committed_offsets("g-kept") == want
    finally:
        b.close()
