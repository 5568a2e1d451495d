"""The peers of bench/test_bench_runtime.py, each run as its own process on the same broker
and topic, handing every record to a no-op handler that counts (bench.runtime_handlers):

    python -m bench.runtime_peers faststream BOOTSTRAP TOPIC GROUP     # one message a call
    python -m bench.runtime_peers faststream-batch BOOTSTRAP TOPIC GROUP   # batch=True
    python -m bench.runtime_peers quixstreams BOOTSTRAP TOPIC GROUP

Each runs until SIGTERM/SIGINT. FastStream consumes with aiokafka; Quix Streams with
confluent-kafka (librdkafka).
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading

from bench.runtime_handlers import count, flush


def faststream(boot: str, topic: str, group: str, batch: bool) -> None:
    from faststream import FastStream
    from faststream.kafka import KafkaBroker

    broker = KafkaBroker(boot, logger=None)
    app = FastStream(broker, logger=None)

    if batch:
        @broker.subscriber(topic, group_id=group, auto_offset_reset="earliest", batch=True,
                           max_records=500)
        async def handle_batch(msgs: list[bytes]) -> None:
            count(len(msgs))
    else:
        @broker.subscriber(topic, group_id=group, auto_offset_reset="earliest")
        async def handle(msg: bytes) -> None:
            count(1)

    async def ticker() -> None:
        while True:
            await asyncio.sleep(0.05)
            flush()

    async def main() -> None:
        t = asyncio.get_running_loop().create_task(ticker())
        await app.run()
        t.cancel()
    asyncio.run(main())


def quixstreams(boot: str, topic: str, group: str) -> None:
    from quixstreams import Application

    app = Application(broker_address=boot, consumer_group=group, auto_offset_reset="earliest",
                      loglevel="WARNING")
    t = app.topic(topic, value_deserializer="bytes", key_deserializer="bytes")
    sdf = app.dataframe(t)
    sdf.update(lambda value: count(1))

    def ticker() -> None:
        import time
        while True:
            time.sleep(0.05)
            flush()
    threading.Thread(target=ticker, daemon=True).start()
    app.run()


if __name__ == "__main__":
    kind, boot, topic, group = sys.argv[1:5]
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    if kind.startswith("faststream"):
        faststream(boot, topic, group, kind.endswith("batch"))
    else:
        quixstreams(boot, topic, group)
