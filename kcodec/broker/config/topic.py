"""Kafka 4.x's topic configs: names, types, defaults, validators, the broker config that
gives each its default (its synonym), and what kcodec's broker does with it.

Every Kafka 4.x topic config is accepted with Kafka's checks and messages
(``validate``); ``INERT`` names those that are accepted and shown but change nothing here,
with the reason. Configs Kafka 4.0 removed (``message.format.version``,
``message.downconversion.enable``, ``message.timestamp.difference.max.ms``) are unknown, as
they are to Kafka 4.x.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kcodec.broker.config.types import (
    LONG_MAX,
    ConfigDef,
    ConfigError,
    at_least,
    between,
    invalid,
    list_of,
    one_of,
)

__all__ = ["TOPIC_CONFIGS", "TopicConfig", "INERT", "validate", "effective", "doc_rows"]

_DAY_MS = 86_400_000


@dataclass(frozen=True)
class TopicConfig:
    """A topic config and the broker config (``log.retention.ms`` for ``retention.ms``)
    whose value is its default; None: no broker-level default, as in Kafka."""

    definition: ConfigDef
    server_default: str | None

    @property
    def name(self) -> str:
        return self.definition.name


def _gzip_level(name: str, v: Any) -> None:
    if v != -1 and not 1 <= v <= 9:
        raise invalid(name, v, "Value must be between 1 and 9, or equal to -1")


_gzip_level.__doc__ = "[1,...,9] or -1"


def _throttled(name: str, v: Any) -> None:
    """``*`` or ``partition:broker,...``, as Kafka's ThrottledReplicaListValidator."""
    if v == ["*"] or not v:
        return
    for item in v:
        left, colon, right = item.partition(":")
        if not colon or not left.strip().isdigit() or not right.strip().isdigit():
            raise invalid(name, ",".join(v), "must be the literal '*' or a list of replicas "
                                             "in the following format: [partitionId]:"
                                             "[brokerId],[partitionId]:[brokerId],...")


_throttled.__doc__ = "[partitionId]:[brokerId],[partitionId]:[brokerId],..."

_CODECS = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


def _t(name: str, type_: str, default: Any, server: str | None, doc: str,
       validator: Any = None) -> TopicConfig:
    return TopicConfig(ConfigDef(name, type_, default, doc, validator), server)


_ALL = [
    _t("cleanup.policy", "LIST", ["delete"], "log.cleanup.policy",
       "delete: time and size retention drop old segments; compact: keep the last record "
       "per key; both together", list_of("compact", "delete")),
    _t("compression.gzip.level", "INT", -1, "compression.gzip.level",
       "the level when the broker recompresses to gzip", _gzip_level),
    _t("compression.lz4.level", "INT", 9, "compression.lz4.level",
       "the level when the broker recompresses to lz4", between(1, 17)),
    _t("compression.type", "STRING", "producer", "compression.type",
       "the codec batches are stored with: producer keeps the producer's, uncompressed or a "
       "codec recompresses", one_of(*_CODECS)),
    _t("compression.zstd.level", "INT", 3, "compression.zstd.level",
       "the level when the broker recompresses to zstd", between(-131072, 22)),
    _t("delete.retention.ms", "LONG", _DAY_MS, "log.cleaner.delete.retention.ms",
       "how long a compacted topic keeps tombstones", at_least(0)),
    _t("file.delete.delay.ms", "LONG", 60000, "log.segment.delete.delay.ms",
       "the wait before a deleted segment's files are removed", at_least(0)),
    _t("flush.messages", "LONG", LONG_MAX, "log.flush.interval.messages",
       "fsync after this many records", at_least(1)),
    _t("flush.ms", "LONG", LONG_MAX, "log.flush.interval.ms",
       "fsync after this long", at_least(0)),
    _t("follower.replication.throttled.replicas", "LIST", [], None,
       "replicas whose follower replication is throttled", _throttled),
    _t("index.interval.bytes", "INT", 4096, "log.index.interval.bytes",
       "bytes between offset index entries", at_least(0)),
    _t("leader.replication.throttled.replicas", "LIST", [], None,
       "replicas whose leader replication is throttled", _throttled),
    _t("local.retention.bytes", "LONG", -2, "log.local.retention.bytes",
       "tiered storage: bytes kept locally (-2: retention.bytes)", at_least(-2)),
    _t("local.retention.ms", "LONG", -2, "log.local.retention.ms",
       "tiered storage: time kept locally (-2: retention.ms)", at_least(-2)),
    _t("max.compaction.lag.ms", "LONG", LONG_MAX, "log.cleaner.max.compaction.lag.ms",
       "the longest a record stays uncompacted", at_least(1)),
    _t("max.message.bytes", "INT", 1048588, "message.max.bytes",
       "the largest record batch the topic takes", at_least(0)),
    _t("message.timestamp.after.max.ms", "LONG", 3600000,
       "log.message.timestamp.after.max.ms",
       "how far after the broker's time a CreateTime timestamp may be", at_least(0)),
    _t("message.timestamp.before.max.ms", "LONG", LONG_MAX,
       "log.message.timestamp.before.max.ms",
       "how far before the broker's time a CreateTime timestamp may be", at_least(0)),
    _t("message.timestamp.type", "STRING", "CreateTime", "log.message.timestamp.type",
       "CreateTime keeps the producer's timestamps, LogAppendTime stamps the broker's",
       one_of("CreateTime", "LogAppendTime")),
    _t("min.cleanable.dirty.ratio", "DOUBLE", 0.5, "log.cleaner.min.cleanable.ratio",
       "the dirty share of a log that makes the cleaner compact it", between(0, 1)),
    _t("min.compaction.lag.ms", "LONG", 0, "log.cleaner.min.compaction.lag.ms",
       "the least time a record stays uncompacted", at_least(0)),
    _t("min.insync.replicas", "INT", 1, "min.insync.replicas",
       "in-sync replicas an acks=all write needs (else NOT_ENOUGH_REPLICAS)", at_least(1)),
    _t("preallocate", "BOOLEAN", False, "log.preallocate",
       "create segment files at their full size"),
    _t("remote.log.copy.disable", "BOOLEAN", False, None,
       "tiered storage: stop copying segments to remote storage"),
    _t("remote.log.delete.on.disable", "BOOLEAN", False, None,
       "tiered storage: delete remote segments when tiering is turned off"),
    _t("remote.storage.enable", "BOOLEAN", False, None,
       "tiered storage for the topic (needs the broker's remote.log.storage.system.enable)"),
    _t("retention.bytes", "LONG", -1, "log.retention.bytes",
       "the largest a partition grows before old segments go (-1: no limit)"),
    _t("retention.ms", "LONG", 7 * _DAY_MS, "log.retention.ms",
       "the longest a segment is kept (-1: no limit)", at_least(-1)),
    _t("segment.bytes", "INT", 1 << 30, "log.segment.bytes",
       "the size at which a segment is rolled", at_least(1048576)),
    _t("segment.index.bytes", "INT", 10485760, "log.index.size.max.bytes",
       "the size of a segment's offset index", at_least(4)),
    _t("segment.jitter.ms", "LONG", 0, "log.roll.jitter.ms",
       "a random part subtracted from segment.ms", at_least(0)),
    _t("segment.ms", "LONG", 7 * _DAY_MS, "log.roll.ms",
       "the age at which a segment is rolled", at_least(1)),
    _t("unclean.leader.election.enable", "BOOLEAN", False, "unclean.leader.election.enable",
       "let an out-of-sync replica become leader"),
]

#: name -> config, in Kafka's alphabetical order
TOPIC_CONFIGS: dict[str, TopicConfig] = {c.name: c for c in _ALL}

#: accepted, validated and described, but changing nothing on this broker: why
INERT: dict[str, str] = {
    "file.delete.delay.ms": "segments are deleted at once; no reader keeps a deleted file open",
    "flush.messages": "the log fsyncs at roll and shutdown; acks do not wait for fsync, as "
                      "Kafka's default",
    "flush.ms": "as flush.messages",
    "follower.replication.throttled.replicas": "the replicas share one log: nothing "
                                               "replicates",
    "leader.replication.throttled.replicas": "as follower.replication.throttled.replicas",
    "local.retention.bytes": "no tiered storage (remote.storage.enable is refused)",
    "local.retention.ms": "no tiered storage",
    "max.compaction.lag.ms": "the cleaner compacts every dirty compacted log it visits, which "
                             "is at least as soon as the lag asks",
    "min.cleanable.dirty.ratio": "as max.compaction.lag.ms: any dirty part is cleaned",
    "preallocate": "segment files grow as written",
    "remote.log.copy.disable": "no tiered storage",
    "remote.log.delete.on.disable": "no tiered storage",
    "segment.index.bytes": "the offset index grows with its segment",
    "segment.jitter.ms": "one node: no roll storm to spread",
    "unclean.leader.election.enable": "the replicas share one log, so none is ever out of "
                                      "sync, and no leader is elected when one stops",
}


def unknown(name: str) -> ConfigError:
    return ConfigError(f"Unknown topic config name: {name}")


_SMALL_SEGMENTS = ConfigDef("segment.bytes", "INT", 1 << 30, "", at_least(14))


def validate(configs: Mapping[str, Any], small_segments: bool = False) -> dict[str, Any]:
    """Typed values of topic ``configs`` (text or typed; None values are skipped), checked
    as Kafka checks them; raises ConfigError with Kafka's message. ``small_segments``:
    segment.bytes down to 14 bytes (Kafka 3's minimum; tests' topics)."""
    out: dict[str, Any] = {}
    for name, value in configs.items():
        c = TOPIC_CONFIGS.get(name)
        if c is None:
            raise unknown(name)
        if value is not None:
            d = _SMALL_SEGMENTS if small_segments and name == "segment.bytes" else c.definition
            out[name] = d.parse(value)
    if out.get("remote.storage.enable"):
        raise ConfigError("Tiered Storage functionality is disabled in the broker. Topic "
                          "cannot be configured with remote log storage.")
    lo = out.get("min.compaction.lag.ms", 0)
    hi = out.get("max.compaction.lag.ms", LONG_MAX)
    if lo > hi:
        raise ConfigError(f"conflict topic config setting min.compaction.lag.ms ({lo}) > "
                          f"max.compaction.lag.ms ({hi})")
    return out


def default_value(name: str, broker: Mapping[str, Any] | None = None) -> Any:
    """A topic config's default: its broker config's value if set, else Kafka's."""
    c = TOPIC_CONFIGS[name]
    if broker and c.server_default is not None and c.server_default in broker:
        return broker[c.server_default]
    return c.definition.default


def effective(topic: Mapping[str, str], broker: Mapping[str, Any] | None = None
              ) -> dict[str, str]:
    """Every topic config's value as text: the topic's own, else its broker default."""
    out = {}
    for name, c in TOPIC_CONFIGS.items():
        if topic.get(name) is not None:
            out[name] = str(topic[name])
        else:
            out[name] = c.definition.text(default_value(name, broker)) or ""
    return out


def doc_rows() -> tuple[list[str], list[list[str]]]:
    """The config reference's table of topic configs: header, rows."""
    rows = []
    for name, c in TOPIC_CONFIGS.items():
        d = c.definition
        ours = d.default_text
        if d.default == LONG_MAX:
            ours = "9223372036854775807"
        note = f"inert: {INERT[name]}" if name in INERT else d.doc
        server = f" (broker default: `{c.server_default}`)" if c.server_default else ""
        rows.append([f"`{name}`", d.type.lower(), f"`{ours}`" if ours else "",
                     d.valid_values, note + server])
    return ["config", "type", "default", "valid values", "meaning"], rows



# ConfigSource ids of DescribeConfigs (Kafka's DescribeConfigsResponse.ConfigSource)
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER, STATIC_BROKER, DEFAULT = 1, 2, 3, 4, 5
#: ConfigType ids of DescribeConfigs v3+
CONFIG_TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6,
                "LIST": 7, "CLASS": 8, "PASSWORD": 9}


@dataclass(frozen=True)
class Described:
    """One config as DescribeConfigs shows it: value, source and its synonyms (name, value,
    source), highest precedence first."""

    name: str
    value: str | None
    source: int
    synonyms: list[tuple[str, str | None, int]]
    type: str
    doc: str


#: topic config -> its broker configs, finest first, with the factor to milliseconds
_SERVER_SYNONYMS: dict[str, list[tuple[str, int]]] = {
    "retention.ms": [("log.retention.ms", 1), ("log.retention.minutes", 60_000),
                     ("log.retention.hours", 3_600_000)],
    "segment.ms": [("log.roll.ms", 1), ("log.roll.hours", 3_600_000)],
}


def describe(topic: Mapping[str, str], broker_levels: Sequence[tuple[int, Mapping[str, Any]]]
             ) -> list[Described]:
    """Every topic config of a topic with overrides ``topic`` (text), given the broker
    levels (source, {broker config name: typed value}) from the highest precedence down."""
    out = []
    for name, c in TOPIC_CONFIGS.items():
        d = c.definition
        synonyms: list[tuple[str, str | None, int]] = []
        value: str | None = None
        source = DEFAULT
        if topic.get(name) is not None:
            synonyms.append((name, str(topic[name]), DYNAMIC_TOPIC))
            value, source = str(topic[name]), DYNAMIC_TOPIC
        servers = _SERVER_SYNONYMS.get(name) or (
            [(c.server_default, 1)] if c.server_default else [])
        for level, values in broker_levels:
            for server, factor in servers:
                if values.get(server) is not None:
                    synonyms.append((server, str(values[server]), level))
                    if value is None:
                        value, source = str(int(values[server]) * factor) if factor > 1 \
                            else d.text(values[server]), level
        if servers:
            server, factor = servers[-1]
            synonyms.append((server, str(d.default // factor) if factor > 1
                             else d.default_text, DEFAULT))
        if value is None:
            value = d.default_text
        out.append(Described(name, value, source, synonyms, d.type, d.doc))
    return out


def incremental(name: str, op: int, value: str | None, current: Mapping[str, str],
                broker: Mapping[str, Any] | None = None) -> str | None:
    """The new override of topic config ``name`` after IncrementalAlterConfigs' ``op``
    (0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT; None: no override), with Kafka's rules: APPEND
    and SUBTRACT work on LIST configs only, from the override or else the default."""
    c = TOPIC_CONFIGS.get(name)
    if c is None:
        raise unknown(name)
    if op == 0:
        return value
    if op == 1:
        return None
    verb = {2: "append", 3: "subtract"}.get(op)
    if verb is None:
        raise ValueError(f"unknown config operation {op}")
    if c.definition.type != "LIST":
        raise ConfigError(f"Config value {verb} is not allowed for config key: {name}")
    old_text = current.get(name)
    if old_text is None:
        old_text = c.definition.text(default_value(name, broker)) or ""
    old = [x.strip() for x in old_text.split(",") if x.strip()]
    given = [x.strip() for x in (value or "").split(",") if x.strip()]
    if op == 2:
        new = old + [x for x in given if x not in old]
    else:
        new = [x for x in old if x not in given]
    return ",".join(new)
