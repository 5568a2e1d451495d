"""Topic configs the log honours, with Kafka's names and defaults.

    LogConfig field                      Kafka topic config                    default
    segment_bytes                        segment.bytes                         1 GiB
    segment_ms                           segment.ms                            7 days
    retention_bytes                      retention.bytes                       -1 (no limit)
    retention_ms                         retention.ms                          7 days (-1 = no limit)
    max_message_bytes                    max.message.bytes                     1048588
    message_timestamp_type               message.timestamp.type                CreateTime
    message_timestamp_before_max_ms      message.timestamp.before.max.ms       no limit
    message_timestamp_after_max_ms       message.timestamp.after.max.ms        1 hour (Kafka 4.0)
    index_interval_bytes                 index.interval.bytes                  4096
    cleanup_policy                       cleanup.policy                        delete (compact, compact,delete)
    delete_retention_ms                  delete.retention.ms                   1 day
    min_compaction_lag_ms                min.compaction.lag.ms                 0
    flush_messages                       flush.messages                        no fsync per append
    flush_ms                             flush.ms                              no timed fsync
    compression_type                     compression.type                      producer
    compression_levels                   compression.{gzip,lz4,zstd}.level     -1, 9, 3
    min_insync_replicas                  min.insync.replicas                   1

``message.timestamp.difference.max.ms`` (the older name) sets both the before and after
limits. Configs the log does not know are ignored by ``from_topic_configs`` (the broker keeps
what it advertises); a bad value of a known one raises ``InvalidConfig``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kcodec.broker.log.errors import InvalidConfig

__all__ = ["LogConfig", "LONG_MAX"]

LONG_MAX = (1 << 63) - 1
_DAY_MS = 86400_000

# Kafka config name -> (field, minimum)
_NAMES: dict[str, tuple[str, int]] = {
    "segment.bytes": ("segment_bytes", 14),
    "segment.ms": ("segment_ms", 1),
    "retention.bytes": ("retention_bytes", -(1 << 63)),
    "retention.ms": ("retention_ms", -1),
    "max.message.bytes": ("max_message_bytes", 0),
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", 0),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", 0),
    "index.interval.bytes": ("index_interval_bytes", 0),
    "flush.messages": ("flush_messages", 1),
    "flush.ms": ("flush_ms", 0),
    "delete.retention.ms": ("delete_retention_ms", 0),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", 0),
    "min.insync.replicas": ("min_insync_replicas", 1),
}
_LEVELS = {"compression.gzip.level": "gzip", "compression.lz4.level": "lz4",
           "compression.zstd.level": "zstd"}
_DEFAULT_LEVELS = {"gzip": -1, "lz4": 9, "zstd": 3}
_CODECS = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")
_POLICIES = {"delete": "delete", "compact": "compact", "compact,delete": "compact,delete",
             "delete,compact": "compact,delete"}
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


@dataclass(frozen=True)
class LogConfig:
    """A partition log's settings (immutable; ``dataclasses.replace`` makes a changed copy)."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * _DAY_MS
    retention_bytes: int = -1
    retention_ms: int = 7 * _DAY_MS
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3600_000
    index_interval_bytes: int = 4096
    cleanup_policy: str = "delete"
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    delete_retention_ms: int = _DAY_MS
    min_compaction_lag_ms: int = 0
    compression_type: str = "producer"
    #: codec name -> the level the broker recompresses at (compression.<codec>.level)
    compression_levels: tuple[tuple[str, int], ...] = tuple(_DEFAULT_LEVELS.items())
    min_insync_replicas: int = 1

    def __post_init__(self) -> None:
        for name, (field, minimum) in _NAMES.items():
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidConfig(f"{name} must be an integer, not {value!r}")
            if not minimum <= value <= LONG_MAX:
                raise InvalidConfig(f"{name} {value} out of range (at least {minimum})")
        if self.segment_bytes > (1 << 31) - 1:
            raise InvalidConfig(f"segment.bytes {self.segment_bytes} above {(1 << 31) - 1}")
        if self.message_timestamp_type not in _TIMESTAMP_TYPES:
            raise InvalidConfig(f"message.timestamp.type {self.message_timestamp_type!r}: "
                                f"expected one of {', '.join(_TIMESTAMP_TYPES)}")
        policy = _POLICIES.get(str(self.cleanup_policy).replace(" ", ""))
        if policy is None:
            raise InvalidConfig(f"cleanup.policy {self.cleanup_policy!r}: expected delete, "
                                f"compact or compact,delete")
        object.__setattr__(self, "cleanup_policy", policy)
        if self.compression_type not in _CODECS:
            raise InvalidConfig(f"compression.type {self.compression_type!r}: expected one of "
                                f"{', '.join(_CODECS)}")

    @property
    def recompress_to(self) -> tuple[int, int | None] | None:
        """(codec id, level) the broker stores batches with, or None to keep the producer's
        (compression.type=producer)."""
        if self.compression_type == "producer":
            return None
        if self.compression_type == "uncompressed":
            return 0, None
        from kcodec.compression import Codec

        level = dict(self.compression_levels).get(self.compression_type)
        if level == -1:      # gzip's "the library's default"
            level = None
        return int(Codec[self.compression_type.upper()]), level

    @property
    def compact(self) -> bool:
        """True when the cleaner compacts the log (cleanup.policy has compact)."""
        return self.cleanup_policy.startswith("compact")

    @property
    def delete(self) -> bool:
        """True when time and size retention delete segments (cleanup.policy has delete)."""
        return self.cleanup_policy.endswith("delete")

    @property
    def log_append_time(self) -> bool:
        """True when the broker stamps batches with its clock (LogAppendTime)."""
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_topic_configs(cls, configs: Mapping[str, str | None],
                           base: LogConfig | None = None) -> LogConfig:
        """A config from Kafka topic configs (string values; None = keep the default or
        ``base``'s value). Unknown names are ignored."""
        values: dict[str, Any] = {}
        for name, raw in configs.items():
            if raw is None:
                continue
            if name == "message.timestamp.difference.max.ms":
                v = _long(name, raw)
                values.setdefault("message_timestamp_before_max_ms", v)
                values.setdefault("message_timestamp_after_max_ms", v)
            elif name in _NAMES:
                values[_NAMES[name][0]] = _long(name, raw)
            elif name == "message.timestamp.type":
                values["message_timestamp_type"] = raw.strip()
            elif name == "cleanup.policy":
                values["cleanup_policy"] = raw.strip()
            elif name == "compression.type":
                values["compression_type"] = raw.strip()
            elif name in _LEVELS:
                levels = dict(values.get("compression_levels", (base or cls()).compression_levels))
                levels[_LEVELS[name]] = _long(name, raw)
                values["compression_levels"] = tuple(levels.items())
        return dataclasses.replace(base or cls(), **values)

    def to_topic_configs(self) -> dict[str, str]:
        """The Kafka topic configs (name -> string value) this config stands for."""
        out = {name: str(getattr(self, field)) for name, (field, _) in _NAMES.items()}
        out["message.timestamp.type"] = self.message_timestamp_type
        out["cleanup.policy"] = self.cleanup_policy
        out["compression.type"] = self.compression_type
        for codec, level in self.compression_levels:
            out[f"compression.{codec}.level"] = str(level)
        return dict(sorted(out.items()))


def _long(name: str, raw: str) -> int:
    try:
        return int(str(raw).strip())
    except ValueError:
        raise InvalidConfig(f"{name} must be an integer, not {raw!r}") from None
