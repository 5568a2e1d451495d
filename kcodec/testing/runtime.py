"""Test a ``kcodec run`` handler in one process, against kcodec's broker embedded in the
test (as FastStream's ``TestBroker`` does for its handlers): records are produced to a real
broker, pulled by the runtime's own puller and handed to the handler by the runtime's own
worker (decoding, retries with backoff, the failed queue, the dead-letter topic), without
starting processes.

    from kcodec.testing.runtime import HandlerTest
    from myapp import handle

    def test_handle():
        with HandlerTest(handle, topics=["orders"], retries=1) as t:
            t.produce("orders", [b'{"sku": 1}', b"not json"])
            t.run()                         # until every record is finished (or timeout)
            assert [m.value for m in t.handled] == [...]
            assert [m.offset for m in t.failed] == [1]

Settings are ``kcodec.runtime.Settings``' (``decode``, ``handle``, ``retries``,
``backoff_ms`` (default 0 here), ``dead_letter_topic`` ...); ``bootstrap`` points the test
at another broker instead of the embedded one.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from kcodec.runtime.handler import is_per_record, per_record
from kcodec.runtime.message import Message

__all__ = ["HandlerTest"]


class HandlerTest:
    """A broker (embedded unless ``bootstrap`` is given), ``topics`` on it, and the
    runtime's direct-mode puller running ``handler`` over them on a thread."""

    def __init__(self, handler: Callable, *, topics: list[str], partitions: int = 1,
                 bootstrap: str | None = None, **settings: Any) -> None:
        from kcodec.runtime.config import Settings

        self.topics = list(topics)
        self.handled: list[Message] = []        # every message handed to the handler
        self._lock = threading.Lock()
        self._cluster: Any = None
        if bootstrap is None:
            from kcodec.broker import Cluster

            self._cluster = Cluster(1, initial_rebalance_delay_ms=0).start()
            bootstrap = self._cluster.bootstrap
        self.bootstrap = bootstrap
        from kcodec.client import Admin

        with Admin(bootstrap_servers=bootstrap) as a:
            have = set(a.list_topics())
            new = [t for t in self.topics if t not in have]
            if new:
                a.create_topics(new, num_partitions=partitions)
        self._dir = tempfile.mkdtemp(prefix="kcodec-handler-test-")
        settings.setdefault("backoff_ms", 0)
        settings.setdefault("linger_ms", 0)
        # build: a store's settings (fsync ...) by their names too; no KCODEC_RUN_* here
        self.settings = Settings.build(env={}, overrides={
            "topics": self.topics, "bootstrap": bootstrap, "storage": "direct",
            "state_dir": self._dir, **settings,
            "group": settings.get("group") or f"test-{uuid.uuid4().hex[:8]}"})
        self.settings.ready()
        self._handler = self._watch(handler)
        self._producer: Any = None

    def _watch(self, handler: Callable) -> Callable:
        """``handler``, noting what it is given (in its own form: per record or batch)."""
        per = is_per_record(handler) or self.settings.handle == "record"

        def note(got: list[Message]) -> None:
            with self._lock:
                self.handled += got
        if per:
            import inspect

            if inspect.iscoroutinefunction(handler):
                async def one_async(m: Message) -> Any:
                    note([m])
                    return await handler(m)
                watched: Callable = one_async
            else:
                def one(m: Message) -> Any:
                    note([m])
                    return handler(m)
                watched = one
            return per_record(watched)
        import inspect

        if inspect.iscoroutinefunction(handler):
            async def batch_async(ms: list[Message]) -> Any:
                note(list(ms))
                return await handler(ms)
            return batch_async

        def batch(ms: list[Message]) -> Any:
            note(list(ms))
            return handler(ms)
        return batch

    # ------------------------------------------------------------------ feeding
    def produce(self, topic: str, values: list[Any], keys: list[Any] | None = None,
                headers: list[Any] | None = None, partition: int | None = None) -> None:
        """Write ``values`` (bytes, or str as UTF-8) to ``topic`` and wait for the acks."""
        from kcodec.client import Producer

        if self._producer is None:
            self._producer = Producer(bootstrap_servers=self.bootstrap, linger_ms=0)
        for i, v in enumerate(values):
            v = v.encode() if isinstance(v, str) else v
            k = keys[i] if keys is not None else None
            k = k.encode() if isinstance(k, str) else k
            self._producer.send(topic, v, key=k, partition=partition,
                                headers=headers[i] if headers is not None else None)
        self._producer.flush(30)

    # ------------------------------------------------------------------ running
    def run(self, timeout: float = 30.0) -> None:
        """Pull and handle until every produced record is finished (done, or failed for
        good after its retries) and committed; ``TimeoutError`` past ``timeout``."""
        from kcodec.client import Admin, TopicPartition
        from kcodec.runtime.puller import Puller
        from kcodec.runtime.storage.file import FileStore

        s = self.settings
        fs = s.store_settings("file")
        store = FileStore(f"{self._dir}/store", "p0", fs.fsync, fs.fsync_interval_ms, s.lease_ms)
        stop = threading.Event()
        puller = Puller(s, 0, store, stop, self._handler)
        errors: list[BaseException] = []

        def go() -> None:
            try:
                puller.run()
            except BaseException as exc:    # reported by run(), in the test's thread
                errors.append(exc)
        t = threading.Thread(target=go, name="kcodec-handler-test", daemon=True)
        t.start()
        deadline = time.monotonic() + timeout
        try:
            with Admin(bootstrap_servers=self.bootstrap) as a:
                while True:
                    if errors:
                        raise errors[0]
                    info = a.describe_cluster(self.topics)
                    tps = [TopicPartition(tt.name, p.partition) for tt in info.topics
                           for p in tt.partitions]
                    ends = a.list_offsets(tps)
                    done = a.committed_offsets(s.group, self.topics)
                    b = store.backlog()
                    if all(done.get(tp, 0) >= end for tp, end in ends.items()) and \
                            b["pending"] + b["delayed"] + b["processing"] == 0:
                        break
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"the handler did not finish every record within "
                                           f"{timeout:g} s (committed {done}, end {ends}, "
                                           f"store {b})")
                    time.sleep(0.05)
        finally:
            stop.set()
            t.join(30)
            self.failed = store.failed_messages(1 << 20)
            self.stats = puller.stats
            store.close()

    failed: list[Message] = []
    stats: Any = None

    # ------------------------------------------------------------------ life
    def close(self) -> None:
        if self._producer is not None:
            self._producer.close()
        if self._cluster is not None:
            self._cluster.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> HandlerTest:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
