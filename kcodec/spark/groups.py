"""Committing a streaming query's progress to a consumer group (``commitOffsetsToGroup``).

Spark's own Kafka source never commits, so lag tools see nothing; with this option each
finished micro-batch's end offsets are committed to a group as a standalone (non-member)
commit, the way Kafka's ``kafka-consumer-groups --reset-offsets`` writes offsets. The
query itself never reads them back: its checkpoint stays the source of truth.
"""

from __future__ import annotations

import dataclasses

from kcodec.spark.options import SourceOptions

__all__ = ["commit_offsets"]


def commit_offsets(opts: SourceOptions, group_id: str, offsets: dict[tuple[str, int], int]
                   ) -> None:
    from kcodec.client import Admin, AdminConfig, TopicPartition
    from kcodec.spark.security import materialize

    if not offsets:
        return
    names = {f.name for f in dataclasses.fields(AdminConfig)}
    kw = {k: v for k, v in materialize(opts.client).items() if k in names}
    kw.setdefault("client_id", "kcodec-spark")
    with Admin(bootstrap_servers=opts.bootstrap, **kw) as admin:
        failed = {tp: err for tp, err in admin.alter_consumer_group_offsets(
            group_id, {TopicPartition(t, p): off for (t, p), off in offsets.items()}).items()
            if err is not None}
    if failed:
        raise next(iter(failed.values()))
