"""A scriptable fake Kafka cluster on loopback for client tests the real broker cannot do.

Each node is an asyncio server on the test's own loop. It answers ApiVersions, Metadata,
InitProducerId, FindCoordinator, DescribeGroups (``groups``) and Produce from a tiny
in-memory log; ``on_produce`` lets a test replace the
answer for one partition (an error code, ``CLOSE`` to drop the connection, ``SILENT`` to
never answer) and ``produce_delay`` holds every Produce answer back. Fetch and ListOffsets
serve ``values[(topic, partition)]`` (a list of record values, offset = index) from the
partition's leader; other nodes answer NOT_LEADER_OR_FOLLOWER. Every request is recorded
in ``requests`` as (node, api_key, header, body). ``on_fetch(node, header, body, writer)``,
a coroutine, may answer a Fetch itself (returning True) -- the hostile broker's hook.
A duplicate of an idempotent batch is answered as ``duplicates`` says: "old" (the default:
DUPLICATE_SEQUENCE_NUMBER, offset -1, as brokers before Kafka's fix), "old+offset"
(DUPLICATE_SEQUENCE_NUMBER with the original offset), "kafka" (NONE with the original
offset, as Kafka and kcodec's broker answer). With ``any_first_sequence`` the first batch
of a producer id the fake has no state for is taken at any sequence, as Kafka does since
its producer state can expire (default: only sequence 0).
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import Any

from kcodec.client.net.core import CLIENT_VERSIONS
from kcodec.protocol import (
    ApiVersionsResponse,
    DescribeGroupsResponse,
    FetchResponse,
    FindCoordinatorResponse,
    InitProducerIdResponse,
    ListOffsetsResponse,
    MetadataResponse,
    ProduceResponse,
    decode_request,
    encode_response,
)
from kcodec.records import RecordBatchBuilder, iter_batches

CLOSE, SILENT = "close", "silent"


class FakeKafka:
    def __init__(self, nodes: int = 2, topics: dict[str, dict[int, int]] | None = None) -> None:
        self.n = nodes
        self.topics = topics if topics is not None else {"t": {0: 0}}   # topic -> partition -> leader
        self.ports: dict[int, int] = {}
        self.servers: list[asyncio.AbstractServer] = []
        self.requests: list[tuple[int, int, Any, Any]] = []
        self.logs: dict[tuple[str, int], list[tuple[int, int, int]]] = {}  # (pid, seq, count)
        self.on_produce: Callable[[int, str, int, Any], Any] | None = None
        self.produce_delay = 0.0
        self.inflight = 0
        self.max_inflight = 0
        self.acks: list[int] = []
        self.values: dict[tuple[str, int], list[bytes]] = {}
        self.not_leader_code = 6   # what a node that is not the leader answers a Fetch with
        self.groups: dict[str, Any] = {}   # group id -> DescribeGroupsResponse.DescribedGroup
        self.writers: set[asyncio.StreamWriter] = set()
        self.on_fetch: Callable[..., Any] | None = None
        self.duplicates = "old"
        self.any_first_sequence = False
        self.next_producer_id = 999

    async def start(self) -> FakeKafka:
        for node in range(self.n):
            server = await asyncio.start_server(
                lambda r, w, node=node: self._handle(node, r, w), "127.0.0.1", 0)
            self.servers.append(server)
            self.ports[node] = server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        for s in self.servers:
            s.close()

    async def kill(self) -> None:
        """The cluster dies: listeners closed (reconnects are refused), connections cut."""
        await self.stop()
        for w in list(self.writers):
            w.close()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    def produced(self, api_key: int = 0) -> list[tuple[int, Any]]:
        return [(node, body) for node, k, _h, body in self.requests if k == api_key]

    # ------------------------------------------------------------------ serving
    async def _handle(self, node: int, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                header, body = decode_request(await reader.readexactly(size))
                self.requests.append((node, header.request_api_key, header, body))
                if header.request_api_key == 0:
                    asyncio.ensure_future(self._produce(node, header, body, writer))
                    continue
                if header.request_api_key == 1:
                    if self.on_fetch is None or not await self.on_fetch(node, header, body, writer):
                        await self._fetch(node, header, body, writer)
                    continue
                msg = self._answer(node, header, body)
                writer.write(encode_response(msg, header.request_api_version, header.correlation_id))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.writers.discard(writer)
            writer.close()

    def _answer(self, node: int, header: Any, body: Any) -> Any:
        key = header.request_api_key
        if key == 18:
            return ApiVersionsResponse(error_code=0, api_keys=[
                ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in CLIENT_VERSIONS.items()
                # no KIP-848 groups here, as brokers before 4.0; no client telemetry
                # (KIP-714: 71, 72), which it does not answer, as brokers before 3.7
                if k not in (68, 69, 71, 72)])
        if key == 3:
            names = list(self.topics) if body.topics is None else [t.name for t in body.topics]
            M = MetadataResponse
            return M(brokers=[M.MetadataResponseBroker(node_id=n, host="127.0.0.1", port=p)
                              for n, p in self.ports.items()],
                     controller_id=0, cluster_id="fake",
                     topics=[M.MetadataResponseTopic(
                         error_code=0 if t in self.topics else 3, name=t,
                         partitions=[M.MetadataResponsePartition(
                             partition_index=p, leader_id=lead, replica_nodes=[lead], isr_nodes=[lead])
                             for p, lead in sorted(self.topics.get(t, {}).items())])
                         for t in names])
        if key == 10:   # every group is coordinated by node 0
            return FindCoordinatorResponse(error_code=0, node_id=0, host="127.0.0.1", port=self.ports[0])
        if key == 15:
            D = DescribeGroupsResponse
            return D(groups=[self.groups.get(g) or D.DescribedGroup(group_id=g, group_state="Dead")
                             for g in body.groups])
        if key == 22:
            self.next_producer_id += 1       # a new id each time, as Kafka's idempotent producers get
            return InitProducerIdResponse(error_code=0, producer_id=self.next_producer_id,
                                          producer_epoch=0)
        if key == 2:
            L = ListOffsetsResponse
            return L(topics=[L.ListOffsetsTopicResponse(name=t.name, partitions=[
                L.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index,
                    error_code=0 if self.topics.get(t.name, {}).get(p.partition_index) == node else 6,
                    offset=0 if p.timestamp == -2 else len(self.values.get((t.name, p.partition_index), [])))
                for p in t.partitions]) for t in body.topics])
        raise AssertionError(f"the fake does not answer API {key}")

    async def _fetch(self, node: int, header: Any, body: Any, writer: asyncio.StreamWriter) -> None:
        F = FetchResponse
        topics, any_data = [], False
        for t in body.topics:
            parts = []
            for p in t.partitions:
                vals = self.values.get((t.topic, p.partition), [])
                leader = self.topics.get(t.topic, {}).get(p.partition)
                code = 0 if leader == node else self.not_leader_code
                records = b""
                if code == 0 and p.fetch_offset < len(vals):
                    b = RecordBatchBuilder(base_offset=p.fetch_offset)
                    for v in vals[p.fetch_offset:]:
                        b.append(None, v, None, 1000)
                    records = b.build()
                    any_data = True
                parts.append(F.PartitionData(partition_index=p.partition, error_code=code,
                                             high_watermark=len(vals), records=records))
            topics.append(F.FetchableTopicResponse(topic=t.topic, partitions=parts))
        if not any_data:
            await asyncio.sleep(min(body.max_wait_ms, 50) / 1000)
        writer.write(encode_response(F(responses=topics), header.request_api_version,
                                     header.correlation_id))

    async def _produce(self, node: int, header: Any, body: Any, writer: asyncio.StreamWriter) -> None:
        self.acks.append(body.acks)
        self.inflight += 1
        self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            if self.produce_delay:
                await asyncio.sleep(self.produce_delay)
            topics = []
            for t in body.topic_data:
                parts = []
                for p in t.partition_data:
                    code, base = self._append(node, t.name, p.index, p.records)
                    if code == CLOSE:
                        writer.close()
                        return
                    if code == SILENT:
                        return
                    parts.append(ProduceResponse.PartitionProduceResponse(
                        index=p.index, error_code=code, base_offset=base, log_append_time_ms=-1))
                topics.append(ProduceResponse.TopicProduceResponse(name=t.name, partition_responses=parts))
            if body.acks != 0:
                writer.write(encode_response(ProduceResponse(responses=topics),
                                             header.request_api_version, header.correlation_id))
        finally:
            self.inflight -= 1

    def _append(self, node: int, topic: str, partition: int, records: Any) -> tuple[Any, int]:
        if self.on_produce is not None:
            code = self.on_produce(node, topic, partition, records)
            if code is not None:
                return code, -1
        return self.write(node, topic, partition, records)

    def write(self, node: int, topic: str, partition: int, records: Any) -> tuple[Any, int]:
        """The broker's own answer: (error code, base offset)."""
        if self.topics.get(topic, {}).get(partition) != node:
            return 6, -1   # NOT_LEADER_OR_FOLLOWER
        log = self.logs.setdefault((topic, partition), [])
        base = sum(c for _p, _s, c in log)
        for b in iter_batches(records):
            if b.producer_id >= 0:
                for i, x in enumerate(log):
                    if x[:2] == (b.producer_id, b.base_sequence):   # already written
                        original = sum(c for _p, _s, c in log[:i])
                        return {"old": (46, -1), "old+offset": (46, original),
                                "kafka": (0, original)}[self.duplicates]
                mine = [x for x in log if x[0] == b.producer_id]
                expected = mine[-1][1] + mine[-1][2] if mine else 0
                if b.base_sequence != expected and (mine or not self.any_first_sequence):
                    return 45, -1   # OUT_OF_ORDER_SEQUENCE_NUMBER
            log.append((b.producer_id, b.base_sequence, b.record_count))
        return 0, base
