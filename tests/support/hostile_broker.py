"""A broker that answers the handshake and Metadata well, then Fetch badly, on purpose.

``HostileBroker(mode)`` runs a one-node ``FakeKafka`` on a loop of its own in a thread (so
a client in another process, or in this one, can talk to it) and replaces its Fetch
answer by ``mode``:

    huge      announce a frame of ``size`` bytes and stream zeros until the peer hangs up
    garbage   a whole frame of ``size`` random bytes (its correlation id is wrong)
    badbody   a whole frame of ``size`` bytes with the right correlation id, then garbage
    drip      a good Fetch answer, one byte every ``interval`` seconds
    stall     half of a good Fetch answer, then nothing
    silent    no answer at all (the connection stays open)
    oversized a good Fetch answer whose partition holds the first ``part`` bytes of a v2
              record batch whose length field says ``size`` bytes: a batch larger than
              any fetch, cut where the fetch's limits cut it
    good      the fake's own answer (empty partitions)

Every mode is answered again on each new connection, as a broken broker does after the
client reconnects. ``fetches`` counts the Fetch requests seen, ``sent`` the bytes written.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

from kcodec.protocol import FetchResponse, encode_response
from kcodec.records.header import ENTRY_OVERHEAD, new_header, patch_header
from tests.support.fake_kafka import FakeKafka

MODES = ("huge", "garbage", "badbody", "drip", "stall", "silent", "oversized", "good")
CHUNK = 1 << 20


class HostileBroker:
    def __init__(self, mode: str, size: int = 500 * 1024 * 1024, interval: float = 1.0,
                 topic: str = "t", part: int = 4096) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.mode, self.size, self.interval, self.part = mode, size, interval, part
        self.topic = topic
        self.fetches = 0
        self.sent = 0
        self.fake = FakeKafka(nodes=1, topics={topic: {0: 0}})
        self.fake.on_fetch = self._fetch
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                        name="hostile-broker")

    def __enter__(self) -> HostileBroker:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.fake.start(), self.loop).result(10)
        return self

    def __exit__(self, *exc: Any) -> None:
        asyncio.run_coroutine_threadsafe(self.fake.kill(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    @property
    def bootstrap(self) -> str:
        return self.fake.bootstrap

    async def _write(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(data)
        self.sent += len(data)
        await writer.drain()

    async def _fetch(self, node: int, header: Any, body: Any,
                     writer: asyncio.StreamWriter) -> bool:
        self.fetches += 1
        mode = self.mode
        if mode == "good":
            return False
        if mode == "silent":
            return True
        if mode == "oversized":
            writer.write(encode_response(self._oversized(body), header.request_api_version,
                                         header.correlation_id))
            return True
        cid = header.correlation_id.to_bytes(4, "big")
        try:
            if mode == "huge":
                await self._write(writer, self.size.to_bytes(4, "big") + cid)
                zeros = bytes(CHUNK)
                left = self.size - 4
                while left > 0 and not writer.is_closing():
                    await self._write(writer, zeros[:min(left, CHUNK)])
                    left -= CHUNK
            elif mode in ("garbage", "badbody"):
                await self._write(writer, self.size.to_bytes(4, "big"))
                head = cid if mode == "badbody" else os.urandom(4)
                await self._write(writer, head)
                left = self.size - 4
                while left > 0 and not writer.is_closing():
                    await self._write(writer, os.urandom(min(left, CHUNK)))
                    left -= CHUNK
            else:
                frame = encode_response(FetchResponse(responses=[]), header.request_api_version,
                                        header.correlation_id)
                if mode == "stall":
                    await self._write(writer, frame[:len(frame) // 2])
                else:   # drip
                    for i in range(len(frame)):
                        await self._write(writer, frame[i:i + 1])
                        await asyncio.sleep(self.interval)
        except (ConnectionError, OSError):
            pass
        return True

    def _oversized(self, body: Any) -> FetchResponse:
        F = FetchResponse
        head = new_header(batch_length=self.size - ENTRY_OVERHEAD, attributes=0,
                          last_offset_delta=999, first_timestamp=0, max_timestamp=0,
                          record_count=1000)
        topics = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                patch_header(head, base_offset=p.fetch_offset)
                cut = min(self.part, p.partition_max_bytes, body.max_bytes)
                records = bytes(head + bytes(max(0, cut - len(head))))[:cut]
                parts.append(F.PartitionData(partition_index=p.partition, error_code=0,
                                             high_watermark=p.fetch_offset + 1000,
                                             records=records))
            topics.append(F.FetchableTopicResponse(topic=t.topic, partitions=parts))
        return F(responses=topics)
