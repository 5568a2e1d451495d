"""Metadata and admin requests go to the least loaded broker (Java's leastLoadedNode): the
live connection with the fewest requests in flight."""

from __future__ import annotations

import asyncio

import pytest

from kcodec.broker import Cluster
from kcodec.client.config import AdminConfig
from kcodec.client.net.cluster import Cluster as ClientCluster

pytestmark = [pytest.mark.broker]


def test_any_connection_prefers_the_one_with_fewest_requests_in_flight():
    with Cluster(nodes=3) as c:
        async def run() -> None:
            cl = ClientCluster(AdminConfig(bootstrap_servers=c.bootstrap))
            try:
                await cl.refresh()
                conns = [await cl.connection(n) for n in sorted(cl.brokers)]
                busy, idle = conns[0], conns[1]
                # requests waiting for answers on every connection but ``idle``
                for conn in cl.connections():      # bootstrap connections too
                    if conn is not idle:
                        for _ in range(3):
                            conn._pending[10_000 + len(conn._pending)] = \
                                asyncio.get_running_loop().create_future()
                for _ in range(10):
                    assert await cl.any_connection() is idle
                for conn in cl.connections():
                    for f in conn._pending.values():
                        f.cancel()
                    conn._pending.clear()
                assert busy.in_flight == 0
            finally:
                await cl.close()
        asyncio.run(run())
