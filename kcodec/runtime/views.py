"""What ``kcodec ctl`` shows from the cluster and the store themselves, so it holds whether
or not the runtime's processes are running, and whichever partitions they own right now.

* ``lag``: the group's committed offsets against the end offsets of every partition of its
  topics (Kafka's side), plus what waits in the store (pending, delayed and processing
  messages: pulled and committed, not yet handled), each shown and summed.
* ``offsets``: the same rows, with the live position of the partitions a running puller
  owns.
* ``backlog``, ``failed``, ``requeue``, ``clear``: the store's queues, read and changed in
  the store (a stopped runtime's too).
"""

from __future__ import annotations

from typing import Any

from kcodec.runtime.message import Message

__all__ = ["STORE_QUESTIONS", "lag", "offsets", "store_answer", "message_json"]

# the questions a store answers alone
STORE_QUESTIONS = ("backlog", "failed", "requeue", "clear")


def offsets(settings: Any, live: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """A row per partition of the group's topics: committed, end, lag; ``position``,
    ``finished`` and ``member`` from ``live`` (the running pullers' rows) where one owns it."""
    from kcodec.client import Admin

    with Admin(**settings.admin_config()) as a:
        got = a.lag(settings.group, list(settings.topics))
    mine = {(r["topic"], r["partition"]): r for r in live or []}
    rows = []
    for pl in got:
        end = pl.end_offset if pl.end_offset >= 0 else None
        lv = mine.get((pl.topic, pl.partition), {})
        behind = pl.lag if end is not None else None
        rows.append({"topic": pl.topic, "partition": pl.partition,
                     "position": lv.get("position"), "committed": pl.committed,
                     "finished": lv.get("finished"), "end": end, "lag": behind,
                     "remaining": behind, "member": lv.get("member")})
    rows.sort(key=lambda r: (r["topic"], r["partition"]))
    return rows


def lag(settings: Any, store: Any, live: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Kafka's lag of the group (every partition) plus the store's backlog, each and summed.
    ``store`` None: direct mode without a store to read."""
    rows = offsets(settings, live)
    kafka = sum(r["lag"] or 0 for r in rows)
    backlog = store.backlog() if store is not None else None
    waiting = 0 if backlog is None else \
        backlog["pending"] + backlog["delayed"] + backlog["processing"]
    return {"total": kafka + waiting, "kafka": kafka, "store": waiting, "backlog": backlog,
            "partitions": [{k: r[k] for k in ("topic", "partition", "committed", "position",
                                              "end", "lag", "member")} for r in rows]}


def store_answer(settings: Any, store: Any, op: str, req: dict[str, Any]) -> Any:
    """The answer to one of ``STORE_QUESTIONS``, from ``store``."""
    if op == "backlog":
        return {"storage": settings.storage, **store.backlog()}
    if op == "failed":
        limit = int(req.get("limit", 20))
        return [message_json(m) for m in store.failed_messages(limit)]
    if op == "requeue":
        return {"requeued": store.requeue()}
    if op == "clear":
        return {"cleared": store.clear()}
    raise ValueError(f"the store does not answer {op!r}")


def message_json(m: Message) -> dict[str, Any]:
    def text(b: Any) -> Any:
        if b is None:
            return None
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            return {"hex": b.hex()}
    return {"topic": m.topic, "partition": m.partition, "offset": m.offset,
            "timestamp": m.timestamp, "attempts": m.attempts, "error": m.error,
            "key": text(m.key), "value": text(m.value)}
