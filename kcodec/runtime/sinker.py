"""A sinker: claims batches from the store under a lease, runs the handler, settles each
record (done, retried later, failed for good) and only then acknowledges them.

While the handler works the lease is renewed (every third of ``--lease-ms``); a sinker that
dies stops renewing and its unacknowledged messages go back to pending when the lease
expires. On SIGINT/SIGTERM the batch in hand is finished first.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from kcodec.runtime.handler import Hung
from kcodec.runtime.work import Stats, Worker

__all__ = ["Sinker"]

log = logging.getLogger(__name__)


class Sinker:
    def __init__(self, settings: Any, slot: int, store: Any, stop: threading.Event,
                 handler: Any) -> None:
        self.s = settings
        self.slot = slot
        self.store = store
        self.stop = stop
        self.stats = Stats()
        self.worker = Worker(settings, handler, store, self.stats)
        self.recycle = False
        self.in_hand = 0
        self._renewed = time.monotonic()

    def run(self) -> int:
        idle = 0.01
        code = 0
        try:
            while not self.stop.is_set() and not self.recycle:
                claim = self.store.claim(self.s.batch_size)
                if claim is None:
                    self.stop.wait(idle)
                    idle = min(idle * 2, 0.2)
                    continue
                idle = 0.01
                self.in_hand = len(claim.messages)
                self._renewed = time.monotonic()
                try:
                    finished = self.worker.process(claim.messages, self._tick)
                except Hung:
                    self.store.ack(claim, claim.refs)   # settled as failed: retried elsewhere
                    code = 3
                    break
                self.store.ack(claim, claim.refs if len(finished) == len(claim.refs) else
                               [claim.refs[i] for i in finished])
                self.in_hand = 0
        finally:
            self.worker.close()
            self.store.close()
        return code

    def _tick(self) -> None:
        now = time.monotonic()
        if now - self._renewed >= self.s.lease_ms / 3000:
            self._renewed = now
            self.store.renew()
