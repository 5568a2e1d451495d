"""Observability shared by the client, the broker, the runtime and the Spark source.

    metrics.py     the registry: counters, gauges, histograms named as Kafka names them
    log.py         debug contexts (``debug=``, ``KCODEC_DEBUG``), redaction, describing bodies
    prometheus.py  Prometheus exposition of registries (the ``prometheus`` extra)
    tracing.py     OpenTelemetry spans and W3C trace context in headers (the ``otel`` extra)
    telemetry.py   KIP-714 client telemetry: the OTLP metrics encoding, both ways

Nothing here imports an optional package until it is asked for.
"""

from kcodec.observe.log import CONTEXTS, Debug, debug_contexts, redact
from kcodec.observe.metrics import Counter, Gauge, Histogram, Registry, Sample

__all__ = ["Registry", "Counter", "Gauge", "Histogram", "Sample", "Debug", "CONTEXTS",
           "debug_contexts", "redact"]
