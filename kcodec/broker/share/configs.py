"""Group configs: the broker's ``group.share.*`` and ``group.consumer.*`` defaults and the
per-group ``share.*`` and ``consumer.*`` overrides that IncrementalAlterConfigs sets on a
GROUP resource (Kafka's group configs, KIP-932, KIP-848 and KIP-1240).

``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms`` (defaults
``group.consumer.session.timeout.ms`` 45000 and ``group.consumer.heartbeat.interval.ms``
5000) must lie within the broker's ``group.consumer.min/max.*`` bounds (45000..60000 and
5000..15000), the heartbeat below the session timeout, as Kafka's GroupConfig checks.

=================================  ==========================  ===========================
group config                       broker default (name)       values
=================================  ==========================  ===========================
share.auto.offset.reset            latest                      latest, earliest,
                                                               by_duration:PnDTnHnMn.nS
share.delivery.count.limit         group.share.delivery.       between group.share.min/
                                   count.limit = 5             max.delivery.count.limit
                                                               (2 and 10)
share.record.lock.duration.ms      group.share.record.lock.    between group.share.min/
                                   duration.ms = 30000         max.record.lock.duration.ms
                                                               (15000 and 60000)
share.session.timeout.ms           group.share.session.        >= 1
                                   timeout.ms = 45000
share.heartbeat.interval.ms        group.share.heartbeat.      >= 1
                                   interval.ms = 5000
share.isolation.level              read_uncommitted            read_uncommitted,
                                                               read_committed
share.partition.max.record.locks   group.share.partition.max.  between 100 and
                                   record.locks = 2000         group.share.max.partition.
                                                               max.record.locks (10000)
=================================  ==========================  ===========================
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["BROKER_DEFAULTS", "CONSUMER_DEFAULTS", "STREAMS_DEFAULTS", "GROUP_CONFIGS", "ShareConfigs", "ShareConfigError",
           "parse_duration_ms"]

BROKER_DEFAULTS: dict[str, int] = {
    "group.share.delivery.count.limit": 5,
    "group.share.min.delivery.count.limit": 2,
    "group.share.max.delivery.count.limit": 10,
    "group.share.record.lock.duration.ms": 30000,
    "group.share.min.record.lock.duration.ms": 15000,
    "group.share.max.record.lock.duration.ms": 60000,
    "group.share.session.timeout.ms": 45000,
    "group.share.heartbeat.interval.ms": 5000,
    "group.share.partition.max.record.locks": 2000,
    "group.share.max.partition.max.record.locks": 10000,
}

#: the consumer protocol's broker configs that bound and default its group configs
CONSUMER_DEFAULTS: dict[str, int] = {
    "group.consumer.session.timeout.ms": 45000,
    "group.consumer.min.session.timeout.ms": 45000,
    "group.consumer.max.session.timeout.ms": 60000,
    "group.consumer.heartbeat.interval.ms": 5000,
    "group.consumer.min.heartbeat.interval.ms": 5000,
    "group.consumer.max.heartbeat.interval.ms": 15000,
}

#: the streams protocol's (KIP-1071) broker configs that bound and default its group configs;
#: kcodec's broker has no streams groups, so the streams.* group configs are accepted,
#: checked and described with Kafka's rules, and inert
STREAMS_DEFAULTS: dict[str, int] = {
    "group.streams.session.timeout.ms": 45000,
    "group.streams.min.session.timeout.ms": 45000,
    "group.streams.max.session.timeout.ms": 60000,
    "group.streams.heartbeat.interval.ms": 5000,
    "group.streams.min.heartbeat.interval.ms": 5000,
    "group.streams.max.heartbeat.interval.ms": 15000,
    "group.streams.num.standby.replicas": 0,
    "group.streams.max.standby.replicas": 2,
    "group.streams.initial.rebalance.delay.ms": 3000,
}
#: the broker configs above that may be 0
STREAMS_ZERO_OK = {"group.streams.num.standby.replicas", "group.streams.max.standby.replicas",
                   "group.streams.initial.rebalance.delay.ms"}

#: group config -> the broker config that gives its default (None: a fixed default)
GROUP_CONFIGS: dict[str, str | None] = {
    "consumer.heartbeat.interval.ms": "group.consumer.heartbeat.interval.ms",
    "consumer.session.timeout.ms": "group.consumer.session.timeout.ms",
    "share.auto.offset.reset": None,
    "share.delivery.count.limit": "group.share.delivery.count.limit",
    "share.record.lock.duration.ms": "group.share.record.lock.duration.ms",
    "share.session.timeout.ms": "group.share.session.timeout.ms",
    "share.heartbeat.interval.ms": "group.share.heartbeat.interval.ms",
    "share.isolation.level": None,
    "share.partition.max.record.locks": "group.share.partition.max.record.locks",
    "streams.heartbeat.interval.ms": "group.streams.heartbeat.interval.ms",
    "streams.initial.rebalance.delay.ms": "group.streams.initial.rebalance.delay.ms",
    "streams.num.standby.replicas": "group.streams.num.standby.replicas",
    "streams.session.timeout.ms": "group.streams.session.timeout.ms",
}
_FIXED = {"share.auto.offset.reset": "latest", "share.isolation.level": "read_uncommitted"}

_DURATION = re.compile(
    r"^P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$")


class ShareConfigError(ValueError):
    """A config name or value the broker refuses (INVALID_CONFIG), with the reason."""


def parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration (``PnDTnHnMn.nS``, no negatives) in milliseconds."""
    m = _DURATION.match(text)
    if m is None or text in ("P", "PT") or text.endswith("T"):
        raise ShareConfigError(f"{text!r} is not an ISO-8601 duration such as P1DT2H or PT30M")
    d, h, mi, s = (m.group(k) for k in "dhms")
    return int(((int(d or 0) * 24 + int(h or 0)) * 60 + int(mi or 0)) * 60000
               + float(s or 0) * 1000)


class ShareConfigs:
    """The broker's share-group defaults and each group's overrides (kept in ``store``)."""

    def __init__(self, broker: dict[str, Any] | None, store: Any) -> None:
        self.broker = dict(BROKER_DEFAULTS)
        self.broker.update(CONSUMER_DEFAULTS)
        self.broker.update(STREAMS_DEFAULTS)
        for k, v in (broker or {}).items():
            if k not in BROKER_DEFAULTS and k not in CONSUMER_DEFAULTS \
                    and k not in STREAMS_DEFAULTS:
                raise ValueError(f"unknown share-group broker config {k!r} (known: "
                                 f"{', '.join(sorted(BROKER_DEFAULTS))})")
            self.broker[k] = int(v)
        self.store = store

    def default(self, name: str) -> str:
        broker = GROUP_CONFIGS[name]
        return _FIXED[name] if broker is None else str(self.broker[broker])

    def get(self, group: str, name: str) -> str:
        return self.store.configs.get(group, {}).get(name) or self.default(name)

    def get_int(self, group: str, name: str) -> int:
        return int(self.get(group, name))

    def overrides(self, group: str) -> dict[str, str]:
        return dict(self.store.configs.get(group, {}))

    def validate(self, name: str, value: str) -> None:
        """Raise ShareConfigError if ``value`` is not allowed for the group config ``name``."""
        if name not in GROUP_CONFIGS:
            raise ShareConfigError(f"unknown group config {name!r} (kcodec's broker knows "
                                   f"{', '.join(sorted(GROUP_CONFIGS))})")
        if name == "share.auto.offset.reset":
            if value in ("latest", "earliest"):
                return
            if value.startswith("by_duration:"):
                parse_duration_ms(value[len("by_duration:"):])
                return
            raise ShareConfigError(f"share.auto.offset.reset must be latest, earliest or "
                                   f"by_duration:PnDTnHnMn.nS, not {value!r}")
        if name == "share.isolation.level":
            if value not in ("read_uncommitted", "read_committed"):
                raise ShareConfigError("share.isolation.level must be read_uncommitted or "
                                       f"read_committed, not {value!r}")
            return
        try:
            n = int(value)
        except ValueError:
            raise ShareConfigError(f"{name} must be an integer, not {value!r}") from None
        lo, hi = 1, 2**31 - 1
        kind, _, rest = name.partition(".")
        bounded = rest if kind in ("consumer", "streams") and rest in (
            "session.timeout.ms", "heartbeat.interval.ms") else None
        if name == "streams.num.standby.replicas":
            if n < 0:
                raise ShareConfigError(f"Invalid value {n} for configuration {name}: Value "
                                       f"must be at least 0")
            if n > self.broker["group.streams.max.standby.replicas"]:
                raise ShareConfigError(f"{name} must be less than or equal to "
                                       f"group.streams.max.standby.replicas")
            return
        if name == "streams.initial.rebalance.delay.ms":
            if n < 0:
                raise ShareConfigError(f"Invalid value {n} for configuration {name}: Value "
                                       f"must be at least 0")
            return
        if bounded is not None:        # Kafka's GroupConfig checks and messages
            low = f"group.{kind}.min.{bounded}"
            high = f"group.{kind}.max.{bounded}"
            if n < self.broker[low]:
                raise ShareConfigError(f"{name} must be greater than or equal to {low}")
            if n > self.broker[high]:
                raise ShareConfigError(f"{name} must be less than or equal to {high}")
            return
        if name == "share.delivery.count.limit":
            lo = self.broker["group.share.min.delivery.count.limit"]
            hi = self.broker["group.share.max.delivery.count.limit"]
        elif name == "share.record.lock.duration.ms":
            lo = self.broker["group.share.min.record.lock.duration.ms"]
            hi = self.broker["group.share.max.record.lock.duration.ms"]
        elif name == "share.partition.max.record.locks":
            lo, hi = 100, self.broker["group.share.max.partition.max.record.locks"]
        if not lo <= n <= hi:
            raise ShareConfigError(f"{name} must be between {lo} and {hi}, not {n}")

    def set(self, group: str, changes: dict[str, str | None], validate_only: bool = False) -> None:
        """Apply SET (a value) and DELETE (None) to a group's overrides, all or nothing."""
        new = self.overrides(group)
        for k, v in changes.items():
            if v is None:
                if k not in GROUP_CONFIGS:
                    raise ShareConfigError(f"unknown group config {k!r}")
                new.pop(k, None)
            else:
                self.validate(k, v)
                new[k] = v
        session = int(new.get("consumer.session.timeout.ms")
                      or self.broker["group.consumer.session.timeout.ms"])
        heartbeat = int(new.get("consumer.heartbeat.interval.ms")
                        or self.broker["group.consumer.heartbeat.interval.ms"])
        if heartbeat >= session and ("consumer.session.timeout.ms" in changes
                                     or "consumer.heartbeat.interval.ms" in changes):
            raise ShareConfigError("consumer.heartbeat.interval.ms must be less than "
                                   "consumer.session.timeout.ms")
        session = int(new.get("streams.session.timeout.ms")
                      or self.broker["group.streams.session.timeout.ms"])
        heartbeat = int(new.get("streams.heartbeat.interval.ms")
                        or self.broker["group.streams.heartbeat.interval.ms"])
        if heartbeat >= session and ("streams.session.timeout.ms" in changes
                                     or "streams.heartbeat.interval.ms" in changes):
            raise ShareConfigError("streams.session.timeout.ms must be greater than "
                                   "streams.heartbeat.interval.ms")
        if not validate_only:
            self.store.put_configs(group, new)
