"""Dynamic broker configs: AlterConfigs / IncrementalAlterConfigs on a BROKER resource, as
Kafka's KRaft broker takes them.

    resource name ""      the cluster-wide default (DYNAMIC_DEFAULT_BROKER_CONFIG)
    resource name "N"     broker N's own value (DYNAMIC_BROKER_CONFIG)

Kafka's rules: a read-only config cannot be changed at run time ("Cannot update these
configs dynamically"); a per-broker config has no cluster-wide default. What kcodec's broker
changes at run time are the topic defaults (``log.retention.ms``, ``compression.type``,
``min.insync.replicas``, ... and the other ``log.*`` synonyms of topic configs): every
topic without its own override follows at once. With ``--data-dir`` the values are kept in
``broker_configs.json`` and read back at start, above the static ``--config`` values.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kcodec.broker.config.broker import BROKER_CONFIGS, PER_BROKER, RO, STATIC_HERE
from kcodec.broker.config.broker import default as broker_default
from kcodec.broker.config.topic import (
    DEFAULT,
    DYNAMIC_BROKER,
    DYNAMIC_DEFAULT_BROKER,
    STATIC_BROKER,
    TOPIC_CONFIGS,
)
from kcodec.broker.config.types import ConfigError

__all__ = ["DynamicConfigs", "describe_broker", "alter_broker"]

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_TOPIC_DEFAULTS = {c.server_default: c.name for c in TOPIC_CONFIGS.values() if c.server_default}


def _scala_set(names: Iterable[str]) -> str:
    return "Set(" + ", ".join(sorted(names)) + ")"


class DynamicConfigs:
    """The dynamic broker config levels (text values, checked when set), kept in
    ``broker_configs.json`` of the data dir."""

    def __init__(self, data_dir: str | None) -> None:
        self.lock = threading.Lock()
        self.default: dict[str, str] = {}
        self.brokers: dict[int, dict[str, str]] = {}
        self._path = None if data_dir is None else os.path.join(data_dir, "broker_configs.json")
        if self._path and os.path.exists(self._path):
            with open(self._path, encoding="utf-8") as f:
                saved = json.load(f)
            self.default = {k: v for k, v in saved.get("default", {}).items()
                            if k in BROKER_CONFIGS}
            self.brokers = {int(b): {k: v for k, v in c.items() if k in BROKER_CONFIGS}
                            for b, c in saved.get("brokers", {}).items()}
        self.static: dict[str, Any] = {}
        #: static configs whose value differs per node (broker.rack): node id -> values
        self.static_per_broker: dict[int, dict[str, Any]] = {}

    def levels(self, broker: int | None) -> list[tuple[int, dict[str, Any]]]:
        """(source, {name: typed value}) from the highest precedence down: broker
        ``broker``'s own (None: the one node's, when there is one), the cluster default, the
        static configs."""
        with self.lock:
            own = self.brokers.get(broker if broker is not None else 0, {}) \
                if broker is not None or len(self.brokers) <= 1 else {}
            per = self.static_per_broker.get(broker if broker is not None else 0, {}) \
                if broker is not None or len(self.static_per_broker) <= 1 else {}
            return [(DYNAMIC_BROKER, _typed(own)), (DYNAMIC_DEFAULT_BROKER, _typed(self.default)),
                    (STATIC_BROKER, {**self.static, **per})]

    def save(self) -> None:
        if self._path is None:
            return
        tmp = self._path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"default": self.default,
                       "brokers": {str(b): c for b, c in self.brokers.items()}}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)


def _typed(values: dict[str, str]) -> dict[str, Any]:
    return {k: BROKER_CONFIGS[k].definition.parse(v) for k, v in values.items()}


def _broker_id(cluster: Any, name: str) -> int | None:
    """None for the cluster default (""), else the node id ``name`` names."""
    if name == "":
        return None
    if name.isdigit() and int(name) in cluster.nodes:
        return int(name)
    raise LookupError(f"Unexpected broker id, expected one of "
                      f"{', '.join(str(n) for n in cluster.nodes)} or the empty string, but "
                      f"received {name}")


@dataclass(frozen=True)
class BrokerEntry:
    name: str
    value: str | None
    source: int
    synonyms: list[tuple[str, str | None, int]]
    type: str
    doc: str
    read_only: bool
    sensitive: bool = False


def describe_broker(cluster: Any, name: str) -> list[BrokerEntry]:
    """DescribeConfigs of a BROKER resource: for "" the dynamic cluster defaults only, as
    Kafka; for a broker id every config with its value, source and synonyms."""
    try:
        broker = _broker_id(cluster, name)
    except LookupError as exc:
        raise ConfigError(str(exc.args[0])) from None
    dyn = cluster.dynamic_configs
    if broker is None:
        with dyn.lock:
            values = dict(dyn.default)
        return [BrokerEntry(k, v, DYNAMIC_DEFAULT_BROKER, [(k, v, DYNAMIC_DEFAULT_BROKER)],
                            BROKER_CONFIGS[k].definition.type, BROKER_CONFIGS[k].definition.doc,
                            False) for k, v in sorted(values.items())]
    levels = dyn.levels(broker)
    out = []
    for k, s in BROKER_CONFIGS.items():
        d = s.definition
        synonyms = [(k, d.text(values[k]), source) for source, values in levels if k in values]
        synonyms.append((k, d.text(broker_default(k)), DEFAULT))
        read_only = s.mode == RO or k in STATIC_HERE
        out.append(BrokerEntry(k, synonyms[0][1], synonyms[0][2], synonyms, d.type, d.doc,
                               read_only, d.type == "PASSWORD"))
    return out


def alter_broker(cluster: Any, name: str, ops: list[tuple[str, int, str | None]], *,
                 incremental: bool, validate_only: bool) -> None:
    """Apply AlterConfigs (``incremental=False``: the level's whole new set) or
    IncrementalAlterConfigs ops to the BROKER resource ``name``; raises ConfigError
    (INVALID_CONFIG) or LookupError (INVALID_REQUEST) with Kafka's messages."""
    broker = _broker_id(cluster, name)
    dyn = cluster.dynamic_configs
    with dyn.lock:
        current = dict(dyn.default if broker is None else dyn.brokers.get(broker, {}))
    new = dict(current) if incremental else {}
    unknown = [k for k, _, _ in ops if k not in BROKER_CONFIGS]
    if unknown:
        raise ConfigError(f"Unknown broker config name: {', '.join(sorted(unknown))}")
    fixed = {k for k, _, _ in ops if BROKER_CONFIGS[k].mode == RO or k in STATIC_HERE}
    if fixed:
        raise ConfigError(f"Cannot update these configs dynamically: {_scala_set(fixed)}")
    if broker is None:
        per_broker = {k for k, _, _ in ops if BROKER_CONFIGS[k].mode == PER_BROKER}
        if per_broker:
            raise ConfigError(f"Cannot update these configs at default cluster level, broker "
                              f"id must be specified: {_scala_set(per_broker)}")
    elif len(cluster.nodes) > 1:
        shared = {k for k, _, _ in ops if k in _TOPIC_DEFAULTS}
        if shared:
            raise ConfigError(f"the nodes of a kcodec cluster share their topics: set "
                              f"{_scala_set(shared)} at the cluster default (resource name "
                              f"\"\") instead of for broker {broker}")
    for k, op, value in ops:
        d = BROKER_CONFIGS[k].definition
        if op == SET:
            new[k] = d.text(d.parse(value)) or ""
        elif op == DELETE:
            new.pop(k, None)
        else:
            verb = "append" if op == APPEND else "subtract"
            if d.type != "LIST":
                raise ConfigError(f"Config value {verb} is not allowed for config key: {k}")
            old = d.parse(new.get(k, d.text(broker_default(k)) or ""))
            items = d.parse(value or "")
            merged = old + [x for x in items if x not in old] if op == APPEND else \
                [x for x in old if x not in items]
            new[k] = ",".join(merged)
    # the topic defaults the change makes, checked (and then applied) as a whole
    with dyn.lock:
        saved = (dict(dyn.default), {b: dict(c) for b, c in dyn.brokers.items()})
        if broker is None:
            dyn.default = new
        else:
            dyn.brokers[broker] = new
    try:
        defaults = topic_defaults_of(cluster)
        if validate_only:
            from kcodec.broker.log import LogConfig

            LogConfig.from_topic_configs(defaults)
        else:
            cluster.state.set_topic_defaults(defaults)
    except Exception as exc:
        with dyn.lock:
            dyn.default, dyn.brokers = saved
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(str(exc)) from None
    if validate_only:
        with dyn.lock:
            dyn.default, dyn.brokers = saved
        return
    with dyn.lock:
        dyn.save()


def topic_defaults_of(cluster: Any) -> dict[str, str]:
    """The topic defaults (topic config name -> text) of every broker config level."""
    from kcodec.broker.config.broker import topic_defaults

    merged: dict[str, Any] = {}
    given: set[str] = set()
    for _source, values in reversed(cluster.dynamic_configs.levels(None)):
        merged.update(values)
        given |= set(values)
    full = {k: merged.get(k, broker_default(k)) for k in BROKER_CONFIGS}
    return topic_defaults(full, given)

