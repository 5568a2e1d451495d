"""What a subscribed consumer watches between rebalances: pattern subscriptions and the
partition counts of its topics.

    subscribe(pattern=...)   consumer protocol: the pattern goes to the group coordinator as
                             ``SubscribedTopicRegex`` (RE2/J syntax) and the broker matches it,
                             now and as topics come and go; classic protocol: the client
                             matches it (Python ``re``, the whole name: ``fullmatch``) against
                             the cluster's topics (internal ones left out, as Java's
                             ``exclude.internal.topics``), as Java's consumer does for a
                             ``Pattern``
    TopicWatch               classic protocol: every ``metadata_max_age_ms`` the metadata is
                             read again; a pattern that matches other topics now (one created
                             or deleted) rejoins the group with them, and the group leader
                             rejoins when a subscribed topic's partition count changed (so
                             new partitions get an owner), as Java's ConsumerCoordinator does
                             with its metadata snapshot. (The consumer protocol's coordinator
                             does both itself.)
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from kcodec.client.net.cluster import Cluster
from kcodec.errors import KcodecError

__all__ = ["compile_pattern", "matching_topics", "partition_counts", "TopicWatch"]


def compile_pattern(pattern: Any) -> re.Pattern:
    """A pattern for client-side matching from a string or a compiled ``re.Pattern``."""
    if isinstance(pattern, re.Pattern):
        return pattern
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"a subscription pattern is a non-empty string or re.Pattern, "
                         f"not {pattern!r}")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"subscription pattern {pattern!r} does not compile: {exc}") from None


def matching_topics(cluster: Cluster, pattern: re.Pattern) -> list[str]:
    """The topics of the cluster's metadata whose whole name ``pattern`` matches."""
    return sorted(name for name, info in cluster.topics.items()
                  if info.error_code == 0 and not info.is_internal
                  and pattern.fullmatch(name) is not None)


def partition_counts(cluster: Cluster, topics: list[str]) -> dict[str, int]:
    return {t: len(cluster.topics[t].partitions) for t in topics if t in cluster.topics
            and cluster.topics[t].error_code == 0}


class TopicWatch:
    """The background check of a classic member (see the module docstring)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.task: asyncio.Task | None = None

    def start(self) -> None:
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()

    async def _run(self) -> None:
        eng = self.engine
        period = max(eng.config.metadata_max_age_ms / 1000, 0.05)
        while True:
            await asyncio.sleep(period)
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except KcodecError:
                continue        # the metadata is asked again next time

    async def check(self) -> None:
        """One look at the metadata: flag a rejoin if the subscription's topics or their
        partition counts changed since the last join."""
        eng = self.engine
        g, subs = eng.group, eng.subs
        if g is None or g.need_rejoin or not getattr(g, "classic_watch", False):
            return
        if subs.pattern is not None:
            await eng.cluster.refresh(None, auto_create=False)
            topics = matching_topics(eng.cluster, subs.pattern)
            if topics != sorted(g.topics):
                subs.subscription = topics
                g.need_rejoin = True
                return
        else:
            # the leader's assignment covered every member's topics: watch them all
            want = sorted(set(subs.subscription) | set(g.joined_counts))
            if want:
                await eng.cluster.refresh(want, auto_create=False)
        if g.leader and g.joined_counts and \
                partition_counts(eng.cluster, list(g.joined_counts)) != g.joined_counts:
            g.need_rejoin = True
