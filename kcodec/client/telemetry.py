"""KIP-714 on the client: ask for a subscription, push the subscribed metrics.

With ``enable_metrics_push`` (on by default, as in Java) and metrics on, a task on the
client's loop asks a broker for its subscription (GetTelemetrySubscriptions; a new client
sends the zero UUID and is given its ``client_instance_id``), and while the subscription
names metrics pushes them every ``push_interval_ms`` (PushTelemetry, the first push at a
random point of the first interval so clients started together spread out), OTLP-encoded
(kcodec.observe.telemetry), compressed with the first of zstd, lz4 and gzip the broker
accepts. Closing pushes once more with ``terminating``.

A broker that has no telemetry APIs (or kcodec's protocol classes without them) ends the
task quietly; an UNKNOWN_SUBSCRIPTION_ID asks for the subscription again; a refusal that
will not change (INVALID_REQUEST, INVALID_RECORD, UNSUPPORTED_VERSION) stops telemetry with
one INFO line; others are retried at the next interval.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from typing import TYPE_CHECKING, Any

from kcodec.errors import KcodecError
from kcodec.observe.log import get_logger
from kcodec.protocol import REQUESTS, ErrorCode

if TYPE_CHECKING:
    from kcodec.client.net.cluster import Cluster

__all__ = ["TelemetryReporter", "GET_TELEMETRY_SUBSCRIPTIONS", "PUSH_TELEMETRY", "available"]

log = get_logger(__name__)
_RNG = random.Random()

GET_TELEMETRY_SUBSCRIPTIONS = 71        # ApiKey.GET_TELEMETRY_SUBSCRIPTIONS (newest specs)
PUSH_TELEMETRY = 72                     # ApiKey.PUSH_TELEMETRY
_PREFERRED = (4, 3, 1)                  # zstd, lz4, gzip
_MAX_BACKOFF_S = 30.0                   # between telemetry attempts that failed
_FINAL = (ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_RECORD,
          ErrorCode.UNSUPPORTED_VERSION)


def available() -> bool:
    """kcodec's protocol classes have the telemetry APIs."""
    return GET_TELEMETRY_SUBSCRIPTIONS in REQUESTS and PUSH_TELEMETRY in REQUESTS


class TelemetryReporter:
    """One client's KIP-714 task (see the module docstring)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.instance_id = uuid.UUID(int=0)
        self.subscription: Any = None
        self.node: int | None = None
        self.pushes = 0
        self.stopped = False
        self.started = time.time_ns()
        self.last_error: int = 0

    async def _request(self, api_key: int, body: Any) -> Any:
        node = self.node
        if node is None:
            conn = await self.cluster.any_connection()
            node = self.node = conn.node_id
        versions = (await self.cluster.connection(node)).core.broker_versions or {}
        if api_key not in versions:
            return None
        return await self.cluster.request(node, body, version=0)

    async def _subscribe(self) -> bool:
        body = await self._request(GET_TELEMETRY_SUBSCRIPTIONS,
                                   REQUESTS[GET_TELEMETRY_SUBSCRIPTIONS](
                                       client_instance_id=self.instance_id))
        if body is None:
            if self.cluster.debug.telemetry:
                log.debug("the broker has no client telemetry (KIP-714): not pushing")
            return False
        if body.error_code:
            return self._refused(body.error_code, "GetTelemetrySubscriptions")
        if self.instance_id.int == 0:
            self.instance_id = body.client_instance_id
        self.subscription = body
        if self.cluster.debug.telemetry:
            log.debug("telemetry: instance %s, subscription %d: %s every %d ms",
                      self.instance_id, body.subscription_id, body.requested_metrics,
                      body.push_interval_ms)
        return True

    def _refused(self, code: int, what: str) -> bool:
        self.last_error = code
        if code in _FINAL:
            log.info("client telemetry stopped: %s says %s", what, ErrorCode(code).name)
            self.stopped = True
            return False
        return True

    def payload(self) -> tuple[int, bytes]:
        """(compression type, bytes) of the subscribed metrics now."""
        from kcodec.compression import compress
        from kcodec.observe.telemetry import encode_metrics, points_from_samples, select

        cm = self.cluster.metrics
        assert cm is not None and self.subscription is not None
        reg = cm.registry
        points = select(points_from_samples(reg.snapshot(), time.time_ns(), self.started,
                                            tuple((k, str(v)) for k, v in reg.common.items())),
                        list(self.subscription.requested_metrics))
        from kcodec._version import __version__

        data = encode_metrics(points, {"client_id": self.cluster.config.client_id,
                                       "client_software_name": "kcodec",
                                       "client_software_version": __version__},
                              ("kcodec", __version__))
        accepted = set(self.subscription.accepted_compression_types or ())
        for codec in _PREFERRED:
            if codec in accepted:
                try:
                    return codec, compress(codec, data)
                except KcodecError:           # its library missing: the next one
                    continue
        return 0, data

    async def push(self, terminating: bool = False) -> int:
        """One PushTelemetry; its error code (-1: nothing was pushed)."""
        sub = self.subscription
        if sub is None or not sub.requested_metrics:
            return -1
        codec, data = self.payload()
        if len(data) > sub.telemetry_max_bytes > 0:
            log.info("client telemetry: %d bytes of metrics exceed the broker's "
                     "telemetry_max_bytes %d: not pushed", len(data), sub.telemetry_max_bytes)
            return ErrorCode.TELEMETRY_TOO_LARGE
        body = await self._request(PUSH_TELEMETRY, REQUESTS[PUSH_TELEMETRY](
            client_instance_id=self.instance_id, subscription_id=sub.subscription_id,
            terminating=terminating, compression_type=codec, metrics=data))
        if body is None:
            return -1
        if body.error_code == 0:
            self.pushes += 1
        return body.error_code

    async def run(self) -> None:
        first = True
        backoff = self.cluster.config.retry_backoff_ms / 1000
        while not self.cluster.closed and not self.stopped:
            try:
                if self.subscription is None and not await self._subscribe():
                    return
                sub = self.subscription
                interval = max(sub.push_interval_ms, 100) / 1000
                await asyncio.sleep(interval * (_RNG.uniform(0.5, 1.5) if first else 1.0))
                first = False
                if self.cluster.closed:
                    return
                if not sub.requested_metrics:
                    self.subscription = None          # ask again: it may have changed
                    continue
                code = await self.push()
                backoff = self.cluster.config.retry_backoff_ms / 1000
                if code == ErrorCode.UNKNOWN_SUBSCRIPTION_ID:
                    self.subscription = None
                elif code > 0 and not self._refused(code, "PushTelemetry"):
                    return
            except asyncio.CancelledError:
                raise
            except KcodecError as exc:
                if self.cluster.debug.telemetry:
                    log.debug("client telemetry: %s (trying again)", exc)
                self.node = None
                # doubling: a broker that drops the connection on a telemetry request is
                # not asked again every retry_backoff_ms (its other requests would fail too)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_S)

    async def close(self) -> None:
        """The terminating push (best effort)."""
        if self.stopped or self.subscription is None:
            return
        try:
            await self.push(terminating=True)
        except KcodecError:
            pass
