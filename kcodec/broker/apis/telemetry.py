"""GetTelemetrySubscriptions and PushTelemetry (KIP-714): the cluster's ClientTelemetry
(kcodec.broker.telemetry) answers; registered only where kcodec's protocol classes have
API keys 71 and 72 (the newest spec set)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kcodec.broker.apis.registry import Answer, Incoming, api
from kcodec.broker.telemetry import GET_TELEMETRY_SUBSCRIPTIONS, PUSH_TELEMETRY
from kcodec.protocol import (
    REQUESTS,
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)

if TYPE_CHECKING:
    from kcodec.broker.node import Node

__all__: list[str] = []


def _client_info(req: Any) -> dict[str, str]:
    conn = req.connection
    name, version = conn.attrs.get("client_software", ("", ""))
    return {"client_id": req.header.client_id or "", "client_software_name": name or "",
            "client_software_version": version or "",
            "client_source_address": getattr(conn, "host", "") or ""}


if GET_TELEMETRY_SUBSCRIPTIONS in REQUESTS and PUSH_TELEMETRY in REQUESTS:
    @api(GetTelemetrySubscriptionsRequest, 0, 0)
    def get_telemetry_subscriptions(node: Node, req: Incoming[GetTelemetrySubscriptionsRequest]
                                   ) -> Answer[GetTelemetrySubscriptionsResponse]:
        from kcodec.broker.telemetry import ACCEPTED_COMPRESSION

        tel = node.cluster.telemetry
        c = tel.subscribe(req.body.client_instance_id, _client_info(req))
        return GetTelemetrySubscriptionsResponse(
            throttle_time_ms=0, error_code=0, client_instance_id=c.instance_id,
            subscription_id=c.subscription_id, accepted_compression_types=ACCEPTED_COMPRESSION,
            push_interval_ms=c.interval_ms, telemetry_max_bytes=tel.max_bytes,
            delta_temporality=False, requested_metrics=c.metrics)

    @api(PushTelemetryRequest, 0, 0)
    def push_telemetry(node: Node, req: Incoming[PushTelemetryRequest]
                      ) -> Answer[PushTelemetryResponse]:
        b = req.body
        code = node.cluster.telemetry.push(b.client_instance_id, b.subscription_id,
                                           b.terminating, b.compression_type, b.metrics or b"")
        return PushTelemetryResponse(throttle_time_ms=0, error_code=code)
