"""The consumer's part of the statistics document (kcodec.client.stats): positions, high
watermarks and lag per partition, and the group's state."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kcodec.client.consumer.engine import ConsumerEngine

__all__ = ["statistics_part"]


def statistics_part(engine: ConsumerEngine) -> Callable[[dict], None]:
    """A function that adds ``engine``'s partitions and group to a statistics document."""
    def fill(doc: dict[str, Any]) -> None:
        subs = engine.subs
        with subs.lock:
            states = [(tp, st.high_watermark, st.position, st.log_start)
                      for tp, st in subs.states.items()]
        for tp, hw, pos, start in states:
            topic = doc["topics"].setdefault(tp.topic, {"topic": tp.topic, "partitions": {}})
            part = topic["partitions"].setdefault(str(tp.partition),
                                                  {"partition": tp.partition, "leader": -1})
            app = pos if pos is not None else -1
            part.update(hi_offset=hw, app_offset=app, ls_offset=start,
                        consumer_lag=max(hw - app, 0) if hw >= 0 and app >= 0 else -1)
        g = engine.group
        cm = engine.cluster.metrics
        if g is not None:
            last = cm.last_rebalance if cm is not None else 0.0
            doc["cgrp"] = {
                "state": "joining" if g.need_rejoin else "up" if g.generation >= 0 else "none",
                "generation": g.generation, "member_id": g.member_id,
                "rebalance_cnt": int(cm.rebalances.value) if cm is not None else 0,
                "rebalance_age": int((time.monotonic() - last) * 1000) if last else -1,
                "assignment_size": len(states)}
    return fill
