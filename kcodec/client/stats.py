"""Statistics every ``statistics_interval_ms``: a JSON document to ``stats_cb``, as
librdkafka's statistics reach confluent-kafka's ``stats_cb``.

The document (all keys always present; times in microseconds as librdkafka has them)::

    {
      "name": "<client_id>",  "client_id": "<client_id>",  "type": "producer|consumer|admin",
      "ts": <monotonic µs>,  "time": <unix seconds>,  "age": <µs since the client started>,
      "brokers": {"<host>:<port>/<node id>": {
          "name": "<host>:<port>/<node id>", "nodeid": <id>, "state": "UP" | "DOWN",
          "waitresp_cnt": <requests in flight>, "tx": <requests>, "txbytes": <bytes sent>,
          "rxbytes": <bytes read>,
          "rtt": {"avg": µs, "max": µs, "p50": µs, "p95": µs, "p99": µs, "cnt": n}}},
      "topics": {"<topic>": {"topic": "<topic>", "partitions": {"<p>": {
          "partition": p, "leader": <node id>,
          "hi_offset": <high watermark, -1 unknown>,          (consumers)
          "app_offset": <position, -1 unknown>,               (consumers)
          "ls_offset": <log start offset, -1 unknown>,        (consumers)
          "consumer_lag": <hi_offset - app_offset, -1 unknown>}}}},
      "cgrp": {"state": "up|joining|none", "generation": n, "member_id": "...",
               "rebalance_cnt": n, "rebalance_age": <ms since the last one, -1 none>,
               "assignment_size": n},                          (consumers with a group)
      "metrics": {<group>: {<name>: value, ...}}    the whole registry (client.metrics())
    }

The callback runs in a worker thread (never on the client's loop), with the document as
a ``str``; an exception in it is logged and the schedule goes on.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from typing import TYPE_CHECKING, Any

from kcodec.observe.log import get_logger

if TYPE_CHECKING:
    from kcodec.client.net.cluster import Cluster

__all__ = ["statistics", "report_statistics"]

log = get_logger(__name__)


def _num(v: float) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return -1
    return v


def statistics(cluster: Cluster) -> dict[str, Any]:
    """The statistics document of the client that owns ``cluster`` (see the module)."""
    cm = cluster.metrics
    cfg = cluster.config
    now = time.monotonic()
    doc: dict[str, Any] = {
        "name": cfg.client_id, "client_id": cfg.client_id,
        "type": cm.kind if cm is not None else "client",
        "ts": int(now * 1e6), "time": int(time.time()),
        "age": int((now - (cm.registry.created if cm is not None else now)) * 1e6),
        "brokers": {}, "topics": {}, "cgrp": {}, "metrics": {},
    }
    live = {c.node_id: c for c in cluster.connections()}
    for node, (host, port) in sorted(cluster.brokers.items()):
        name = f"{host}:{port}/{node}"
        b: dict[str, Any] = {"name": name, "nodeid": node,
                             "state": "UP" if node in live else "DOWN",
                             "waitresp_cnt": live[node].in_flight if node in live else 0,
                             "tx": 0, "txbytes": 0, "rxbytes": 0,
                             "rtt": {"avg": 0, "max": 0, "p50": 0, "p95": 0, "p99": 0, "cnt": 0}}
        nm = cm.nodes.get(node) if cm is not None else None
        if nm is not None:
            h = nm.latency
            b.update(tx=int(nm.requests.value), txbytes=int(nm.out_bytes.value),
                     rxbytes=int(nm.in_bytes.value))
            b["rtt"] = {"avg": int(h.avg * 1000), "max": int(h.max * 1000),
                        "p50": int(h.percentile(0.5) * 1000),
                        "p95": int(h.percentile(0.95) * 1000),
                        "p99": int(h.percentile(0.99) * 1000), "cnt": h.count}
        doc["brokers"][name] = b
    for t, info in sorted(cluster.topics.items()):
        parts = {str(p): {"partition": p, "leader": lead}
                 for p, lead in sorted(info.partitions.items())}
        doc["topics"][t] = {"topic": t, "partitions": parts}
    for key, part in cluster.stats_parts.items():
        try:
            part(doc)
        except Exception as exc:   # a part of a closing client: leave it out
            log.debug("statistics: %s left out: %s", key, exc)
    if cm is not None:
        doc["metrics"] = {g: {n: _clean(v) for n, v in names.items()}
                          for g, names in cm.registry.as_dict().items()}
    return doc


def _clean(v: Any) -> Any:
    if isinstance(v, list):
        return [{"tags": x["tags"], "value": _num(x["value"])} for x in v]
    return _num(v)


async def report_statistics(cluster: Cluster) -> None:
    """Every ``statistics_interval_ms`` until the client closes: the document to
    ``stats_cb``, in a worker thread."""
    cfg = cluster.config
    period = cfg.statistics_interval_ms / 1000
    loop = asyncio.get_running_loop()
    while not cluster.closed:
        await asyncio.sleep(period)
        if cluster.closed:
            return
        text = json.dumps(statistics(cluster), allow_nan=False)
        try:
            await loop.run_in_executor(None, cfg.stats_cb, text)
        except Exception as exc:
            log.warning("stats_cb raised %s: %s (the statistics go on)", type(exc).__name__,
                        exc)
