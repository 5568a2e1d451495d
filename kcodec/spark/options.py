"""The options of the ``kcodec`` source and sink, read as Spark's Kafka connector reads them.

Spark hands a data source its options lower-cased, every value a string. This module
checks them (unknown, conflicting and rejected ones raise ``ValueError`` with a message
that says what to do) and turns them into plain Python values; it imports no pyspark, so
the driver-side planning can be tested without a Spark session.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "SourceOptions", "SinkOptions", "parse_source", "parse_sink", "client_config",
    "EARLIEST", "LATEST",
]

EARLIEST = -2
LATEST = -1

# Options of the source (lower-case), as Spark's Kafka source names them.
_SOURCE = {
    "subscribe", "subscribepattern", "assign", "startingoffsets", "endingoffsets",
    "startingoffsetsbytimestamp", "endingoffsetsbytimestamp", "startingtimestamp",
    "endingtimestamp", "startingoffsetsbytimestampstrategy", "failondataloss",
    "minpartitions", "maxrecordsperpartition", "includeheaders", "maxoffsetspertrigger",
    "minoffsetspertrigger", "maxtriggerdelay", "fetchoffset.numretries",
    "fetchoffset.retryintervalms", "kafkaconsumer.polltimeoutms", "groupidprefix",
    # kcodec's own
    "commitoffsetstogroup", "kcodec.taskmetrics",
}
_SINK = {"topic", "includeheaders", "kcodec.taskmetrics", "kcodec.deliveryguarantee",
         "kcodec.transactionalidprefix"}

# kafka.* settings Spark refuses, with its reasons.
_REJECTED_SOURCE = {
    "auto.offset.reset": "set the source option 'startingOffsets' instead (earliest, latest "
                         "or JSON offsets); offsets are managed by the query, not the consumer",
    "key.deserializer": "keys are always binary: cast them in the query "
                        "(e.g. CAST(key AS STRING))",
    "value.deserializer": "values are always binary: cast them in the query "
                          "(e.g. CAST(value AS STRING)) or parse them with from_json",
    "enable.auto.commit": "the query tracks its offsets in its checkpoint; to show progress "
                          "to lag tools use the option commitOffsetsToGroup=true",
    "interceptor.classes": "consumer interceptors are Java classes and cannot run here",
}
_REJECTED_SINK = {
    "key.serializer": "keys are written as given: cast the key column to string or binary",
    "value.serializer": "values are written as given: cast the value column to string or "
                        "binary",
    "interceptor.classes": "producer interceptors are Java classes and cannot run here",
}
# kafka.* names kcodec's client understands (Java's names, dots); what it lacks is refused.
_CLIENT_COMMON = {
    "bootstrap.servers", "client.id", "request.timeout.ms",
    "socket.connection.setup.timeout.ms", "retry.backoff.ms", "reconnect.backoff.ms",
    "reconnect.backoff.max.ms", "connections.max.idle.ms", "metadata.max.age.ms",
    "default.api.timeout.ms",
}
_CLIENT_CONSUMER = {
    "isolation.level", "fetch.min.bytes", "fetch.max.bytes", "max.partition.fetch.bytes",
    "fetch.max.wait.ms", "check.crcs", "group.id", "session.timeout.ms",
    "heartbeat.interval.ms",
}
_CLIENT_PRODUCER = {
    "acks", "linger.ms", "batch.size", "max.in.flight.requests.per.connection", "retries",
    "delivery.timeout.ms", "compression.type", "compression.level", "enable.idempotence",
    "buffer.memory",
}
_INT_SETTINGS = {
    "request.timeout.ms", "socket.connection.setup.timeout.ms", "retry.backoff.ms",
    "reconnect.backoff.ms", "reconnect.backoff.max.ms", "connections.max.idle.ms",
    "metadata.max.age.ms", "default.api.timeout.ms", "fetch.min.bytes", "fetch.max.bytes",
    "max.partition.fetch.bytes", "fetch.max.wait.ms", "session.timeout.ms",
    "heartbeat.interval.ms", "linger.ms", "batch.size",
    "max.in.flight.requests.per.connection", "retries", "delivery.timeout.ms",
    "compression.level", "buffer.memory",
}
_RENAME = {"default.api.timeout.ms": "api_timeout_ms"}


def _bool(name: str, v: str | None, default: bool) -> bool:
    if v is None:
        return default
    s = v.strip().lower()
    if s in ("true", "false"):
        return s == "true"
    raise ValueError(f"option {name} must be true or false, got {v!r}")


def _int(name: str, v: str | None, default: int | None, low: int = 0) -> int | None:
    if v is None:
        return default
    try:
        n = int(v.strip())
    except ValueError:
        raise ValueError(f"option {name} must be an integer, got {v!r}") from None
    if n < low:
        raise ValueError(f"option {name} must be at least {low}, got {n}")
    return n


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h)?\s*$")


def _duration_ms(name: str, v: str | None, default: int) -> int:
    """Spark's durations: "15m", "30s", "500ms" or plain milliseconds."""
    if v is None:
        return default
    m = _DURATION.match(v.lower())
    if not m:
        raise ValueError(f"option {name} must be a duration such as 15m, 30s or 500ms, "
                         f"got {v!r}")
    unit = {"ms": 1, None: 1, "s": 1000, "m": 60000, "min": 60000, "h": 3600000}[m.group(2)]
    return int(m.group(1)) * unit


def _json(name: str, v: str) -> Any:
    try:
        return json.loads(v)
    except ValueError as exc:
        raise ValueError(f"option {name} is not valid JSON ({exc}): {v!r}") from None


def _partition_map(name: str, v: str) -> dict[tuple[str, int], int]:
    """``{"topic": {"0": 23, "1": -1}}`` -> {(topic, 0): 23, ...}."""
    obj = _json(name, v)
    out: dict[tuple[str, int], int] = {}
    if not isinstance(obj, dict):
        raise ValueError(f'option {name} must be a JSON object like {{"topic": {{"0": 23}}}}, '
                         f"got {v!r}")
    for topic, parts in obj.items():
        if not isinstance(parts, dict):
            raise ValueError(f"option {name}: topic {topic!r} must map partitions to numbers")
        for p, off in parts.items():
            try:
                pn = int(p)
            except ValueError:
                raise ValueError(f"option {name}: {p!r} is not a partition number") from None
            if not isinstance(off, int) or isinstance(off, bool):
                raise ValueError(f"option {name}: {topic}[{p}] must be an integer, got {off!r}")
            out[(topic, pn)] = off
    return out


@dataclass
class OffsetSpec:
    """Where a range starts or ends: "earliest"/"latest", per-partition offsets (with -2
    earliest, -1 latest), per-partition timestamps, or one timestamp for all."""

    kind: str                       # earliest | latest | offsets | timestamps | timestamp
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    timestamp: int = 0


def _offset_spec(opts: dict[str, str], which: str, default: str, streaming: bool
                 ) -> OffsetSpec:
    ts_all = opts.get(f"{which}timestamp")
    by_ts = opts.get(f"{which}offsetsbytimestamp")
    offs = opts.get(f"{which}offsets")
    if ts_all is not None:          # Spark: the global timestamp wins over the others
        return OffsetSpec("timestamp", timestamp=_int(f"{which}Timestamp", ts_all, 0) or 0)
    if by_ts is not None:
        m = _partition_map(f"{which}OffsetsByTimestamp", by_ts)
        return OffsetSpec("timestamps", offsets=m)
    v = (offs if offs is not None else default).strip()
    low = v.lower()
    spec = OffsetSpec(low) if low in ("earliest", "latest") else \
        OffsetSpec("offsets", offsets=_partition_map(f"{which}Offsets", v))
    # Spark's own rules for what each end may be.
    if which == "starting" and not streaming:
        if spec.kind == "latest" or LATEST in spec.offsets.values():
            raise ValueError("startingOffsets: latest (-1) is not allowed for a batch query")
    if which == "ending":
        if spec.kind == "earliest" or EARLIEST in spec.offsets.values():
            raise ValueError("endingOffsets: earliest (-2) is not allowed for a batch query")
    return spec


@dataclass
class SourceOptions:
    bootstrap: str
    subscribe: list[str] | None
    pattern: str | None
    assign: list[tuple[str, int]] | None
    starting: OffsetSpec
    ending: OffsetSpec | None
    timestamp_strategy: str
    fail_on_data_loss: bool
    min_partitions: int | None
    max_records_per_partition: int | None
    include_headers: bool
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    poll_timeout_ms: int
    fetch_retries: int
    fetch_retry_interval_ms: int
    group_id_prefix: str
    commit_to_group: str | None
    read_committed: bool
    client: dict[str, Any]
    task_metrics: int | None = None     # kcodec.spark.taskmetrics: the accumulator's id

    def topics_of(self, names: list[str]) -> list[str]:
        """The subscribed topics among ``names`` (subscribe / subscribePattern)."""
        if self.subscribe is not None:
            return [t for t in self.subscribe]
        if self.pattern is not None:
            rx = re.compile(self.pattern)
            return sorted(t for t in names if rx.fullmatch(t) and not t.startswith("__"))
        return sorted({t for t, _ in self.assign or []})


def client_config(opts: dict[str, str], role: str) -> dict[str, Any]:
    """The ``kafka.*`` options as kcodec client keyword arguments (snake_case)."""
    allowed = _CLIENT_COMMON | (_CLIENT_CONSUMER if role == "consumer" else _CLIENT_PRODUCER)
    rejected = _REJECTED_SOURCE if role == "consumer" else _REJECTED_SINK
    from kcodec.spark.security import SECURITY_NAMES, security_config

    out: dict[str, Any] = {}
    security: dict[str, str] = {}
    for k, v in opts.items():
        if not k.startswith("kafka."):
            continue
        name = k[6:]
        if name in SECURITY_NAMES:
            security[name] = v
            continue
        if name in rejected:
            raise ValueError(f"Kafka option 'kafka.{name}' is not supported: {rejected[name]}")
        if name not in allowed:
            raise ValueError(
                f"Kafka option 'kafka.{name}' is not supported by kcodec's {role} (it "
                f"understands kafka.{', kafka.'.join(sorted(allowed))} and the security "
                "settings kafka.security.protocol, kafka.sasl.* and kafka.ssl.*)")
        if name in ("bootstrap.servers", "group.id"):
            continue
        if name in _INT_SETTINGS:
            value: Any = _int(k, v, 0)
        elif name in ("check.crcs", "enable.idempotence"):
            value = _bool(k, v, True)
        else:
            value = v
        out[_RENAME.get(name, name.replace(".", "_"))] = value
    out.update(security_config(security))
    return out


def _check_names(opts: dict[str, str], known: set[str], what: str) -> None:
    for k in opts:
        if k.startswith("kafka.") or k in known:
            continue
        raise ValueError(f"unknown option {k!r} for the kcodec {what} (options: "
                         f"{', '.join(sorted(known))} and kafka.*)")


def parse_source(raw: Any, streaming: bool = False) -> SourceOptions:
    opts = {str(k).lower(): str(v) for k, v in dict(raw).items()}
    _check_names(opts, _SOURCE, "source")
    bootstrap = opts.get("kafka.bootstrap.servers")
    if not bootstrap:
        raise ValueError("option kafka.bootstrap.servers is required (host:port[,host:port])")
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(given) != 1:
        raise ValueError("exactly one of the options subscribe, subscribePattern, assign must "
                         f"be given (got {', '.join(given) or 'none'})")
    subscribe = pattern = assign = None
    if "subscribe" in opts:
        subscribe = [t.strip() for t in opts["subscribe"].split(",") if t.strip()]
        if not subscribe:
            raise ValueError("option subscribe: no topic given")
    elif "subscribepattern" in opts:
        pattern = opts["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"option subscribePattern is not a valid pattern: {exc}") from None
    else:
        m = _json("assign", opts["assign"])
        if not isinstance(m, dict) or not all(isinstance(v, list) for v in m.values()):
            raise ValueError('option assign must be JSON like {"topic": [0, 1]}, got '
                             f"{opts['assign']!r}")
        assign = sorted((t, int(p)) for t, ps in m.items() for p in ps)
        if not assign:
            raise ValueError("option assign: no partition given")
    if not streaming and "endingoffsets" not in opts and "endingoffsetsbytimestamp" not in opts \
            and "endingtimestamp" not in opts:
        ending: OffsetSpec | None = OffsetSpec("latest")
    elif streaming:
        for k in ("endingoffsets", "endingoffsetsbytimestamp", "endingtimestamp"):
            if k in opts:
                raise ValueError(f"option {k} is for batch queries; a stream has no end")
        ending = None
    else:
        ending = _offset_spec(opts, "ending", "latest", False)
    starting = _offset_spec(opts, "starting", "latest" if streaming else "earliest", streaming)
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise ValueError("option startingOffsetsByTimestampStrategy must be error or latest, "
                         f"got {strategy!r}")
    iso = opts.get("kafka.isolation.level", "read_uncommitted")
    if iso not in ("read_uncommitted", "read_committed"):
        raise ValueError("option kafka.isolation.level must be read_uncommitted or "
                         f"read_committed, got {iso!r}")
    minp = _int("minPartitions", opts.get("minpartitions"), None, 1)
    maxr = _int("maxRecordsPerPartition", opts.get("maxrecordsperpartition"), None, 1)
    maxo = _int("maxOffsetsPerTrigger", opts.get("maxoffsetspertrigger"), None, 1)
    mino = _int("minOffsetsPerTrigger", opts.get("minoffsetspertrigger"), None, 1)
    if maxo is not None and mino is not None and mino > maxo:
        raise ValueError(f"option minOffsetsPerTrigger ({mino}) is above maxOffsetsPerTrigger "
                         f"({maxo})")
    commit = opts.get("commitoffsetstogroup")
    commit_group: str | None = None
    if commit is not None and commit.strip().lower() not in ("false", ""):
        if not streaming:
            raise ValueError("option commitOffsetsToGroup is for streaming queries")
        # true: a group named from groupIdPrefix and the subscription; else the group name
        commit_group = "" if commit.strip().lower() == "true" else commit.strip()
    client = client_config(opts, "consumer")
    client.pop("isolation_level", None)
    try:
        from kcodec.client.config import ConsumerConfig

        ConsumerConfig.from_kwargs(bootstrap_servers=bootstrap,
                                   **{k: v for k, v in client.items() if not k.endswith("_pem")})
    except ValueError as exc:
        raise ValueError(f"kafka.* consumer settings: {exc}") from None
    return SourceOptions(
        bootstrap=bootstrap, subscribe=subscribe, pattern=pattern, assign=assign,
        starting=starting, ending=ending, timestamp_strategy=strategy,
        fail_on_data_loss=_bool("failOnDataLoss", opts.get("failondataloss"), True),
        min_partitions=minp, max_records_per_partition=maxr,
        include_headers=_bool("includeHeaders", opts.get("includeheaders"), False),
        max_offsets_per_trigger=maxo, min_offsets_per_trigger=mino,
        max_trigger_delay_ms=_duration_ms("maxTriggerDelay", opts.get("maxtriggerdelay"),
                                          15 * 60000),
        poll_timeout_ms=_int("kafkaConsumer.pollTimeoutMs",
                             opts.get("kafkaconsumer.polltimeoutms"), 120000, 1) or 120000,
        fetch_retries=_int("fetchOffset.numRetries", opts.get("fetchoffset.numretries"), 3)
        or 0,
        fetch_retry_interval_ms=_int("fetchOffset.retryIntervalMs",
                                     opts.get("fetchoffset.retryintervalms"), 10) or 0,
        group_id_prefix=opts.get("groupidprefix", "spark-kafka-source"),
        commit_to_group=commit_group,
        read_committed=iso == "read_committed",
        client=client,
        task_metrics=_int("kcodec.taskMetrics", opts.get("kcodec.taskmetrics"), None),
    )


@dataclass
class SinkOptions:
    bootstrap: str
    topic: str | None
    include_headers: bool
    client: dict[str, Any]
    task_metrics: int | None = None     # kcodec.spark.taskmetrics: the accumulator's id
    exactly_once: bool = False          # kcodec.deliveryGuarantee=exactly_once
    txn_prefix: str | None = None       # kcodec.transactionalIdPrefix


#: the sink's producer batch.size unless ``kafka.batch.size`` says otherwise (bytes of
#: records before compression; under the brokers' default max.message.bytes of 1 MiB)
SINK_BATCH_SIZE = 512 * 1024


def parse_sink(raw: Any) -> SinkOptions:
    opts = {str(k).lower(): str(v) for k, v in dict(raw).items()}
    _check_names(opts, _SINK | {"checkpointlocation", "path"}, "sink")
    bootstrap = opts.get("kafka.bootstrap.servers")
    if not bootstrap:
        raise ValueError("option kafka.bootstrap.servers is required (host:port[,host:port])")
    client = client_config(opts, "producer")
    client.setdefault("acks", "all")
    # the sink hands the producer whole Arrow columns: Kafka's 16 KiB default would cut a
    # task's rows into thousands of batches, each costing a numpy pass and a queue entry
    client.setdefault("batch_size", SINK_BATCH_SIZE)
    try:
        from kcodec.client.config import ProducerConfig

        ProducerConfig.from_kwargs(bootstrap_servers=bootstrap,
                                   **{k: v for k, v in client.items() if not k.endswith('_pem')})
    except ValueError as exc:
        raise ValueError(f"kafka.* producer settings: {exc}") from None
    topic = opts.get("topic")
    exactly_once = _guarantee(opts.get("kcodec.deliveryguarantee"))
    prefix = opts.get("kcodec.transactionalidprefix")
    if exactly_once:
        if client.get("acks") not in ("all", "-1"):
            raise ValueError("kcodec.deliveryGuarantee=exactly_once writes in transactions, "
                             f"which need kafka.acks=all, not {client.get('acks')!r}")
        if client.get("enable_idempotence") is False:
            raise ValueError("kcodec.deliveryGuarantee=exactly_once writes in transactions, "
                             "which need kafka.enable.idempotence=true")
    elif prefix is not None:
        raise ValueError("option kcodec.transactionalIdPrefix is for "
                         "kcodec.deliveryGuarantee=exactly_once")
    if prefix is not None and not _TXN_PREFIX.fullmatch(prefix):
        raise ValueError("option kcodec.transactionalIdPrefix must be 1-200 characters of "
                         f"letters, digits, '.', '_' and '-', got {prefix!r}")
    return SinkOptions(bootstrap, topic.strip() if topic else None,
                       _bool("includeHeaders", opts.get("includeheaders"), False), client,
                       _int("kcodec.taskMetrics", opts.get("kcodec.taskmetrics"), None),
                       exactly_once, prefix)


_TXN_PREFIX = re.compile(r"[A-Za-z0-9._-]{1,200}")


def _guarantee(v: str | None) -> bool:
    """``kcodec.deliveryGuarantee``: True for exactly_once."""
    if v is None:
        return False
    s = v.strip().lower().replace("-", "_")
    if s in ("exactly_once", "at_least_once"):
        return s == "exactly_once"
    raise ValueError("option kcodec.deliveryGuarantee must be at_least_once or exactly_once, "
                     f"got {v!r}")
