"""Committing a streaming query's progress to a consumer group (``commitOffsetsToGroup``).

Spark's own Kafka source never commits, so lag tools see nothing; with this option each
finished micro-batch's end offsets are committed to a group as a standalone (non-member)
commit, the way Kafka's ``kafka-consumer-groups --reset-offsets`` writes offsets. The
query itself never reads them back: its checkpoint stays the source of truth.
"""

from __future__ import annotations

import asyncio
import dataclasses

from kcodec.spark.options import SourceOptions

__all__ = ["commit_offsets"]


def commit_offsets(opts: SourceOptions, group_id: str, offsets: dict[tuple[str, int], int]
                   ) -> None:
    from kcodec.client.config import ConsumerConfig
    from kcodec.client.consumer.classic_group import ClassicGroupMember
    from kcodec.client.net.cluster import Cluster
    from kcodec.client.structs import TopicPartition
    from kcodec.spark.security import materialize

    if not offsets:
        return
    names = {f.name for f in dataclasses.fields(ConsumerConfig)}
    kw = {k: v for k, v in materialize(opts.client).items() if k in names}
    kw.setdefault("client_id", "kcodec-spark")
    cfg = ConsumerConfig.from_kwargs(bootstrap_servers=opts.bootstrap, group_id=group_id,
                                     enable_auto_commit=False, **kw)

    async def go() -> None:
        cluster = Cluster(cfg)
        try:
            member = ClassicGroupMember(cluster, cfg)
            await member.commit({TopicPartition(t, p): off for (t, p), off in offsets.items()})
        finally:
            await cluster.close()

    asyncio.run(go())
