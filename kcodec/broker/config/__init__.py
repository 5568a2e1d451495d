"""The broker's configs by Kafka's names, with Kafka's defaults, and how ``Cluster`` reads
them.

    types.py     Kafka's config types and validators, with Kafka's messages (its ConfigDef)
    broker.py    the broker configs kcodec honours: Kafka 4.x's names, types and defaults
    dynamic.py   dynamic broker configs: AlterConfigs on a BROKER resource, as KRaft takes them
    topic.py     Kafka 4.x's topic configs: types, defaults, synonyms, what kcodec does with each
    quotas.py    client quotas of users, client ids or ips (KIP-546)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kcodec.broker.config.broker import BROKER_CONFIGS, default, resolve
from kcodec.broker.config.types import ConfigDef, ConfigError

__all__ = ["BROKER_CONFIGS", "ConfigDef", "ConfigError", "settings_from"]


def settings_from(base: Mapping[str, Any] | None, config: Mapping[str, Any] | None,
                  values: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The ``Cluster`` keywords' values once ``config`` (and, below the keywords, ``base``)
    is applied, plus ``"config"``: every broker config's typed value, and ``"given"``: the
    names set rather than defaulted. ``values`` are the keywords as called, ``defaults``
    their defaults. A config given both by name and by its keyword raises ConfigError."""
    base_r, cfg_r = resolve(base), resolve(config)
    kw: dict[str, Any] = {s.keyword: values[s.keyword]
                          for s in BROKER_CONFIGS.values() if s.keyword is not None}
    full: dict[str, Any] = {}
    given: set[str] = set()
    share = dict(values.get("share_group_configs") or {})
    for name, s in BROKER_CONFIGS.items():
        if s.keyword is None:
            if name.startswith("group.share."):
                if name in cfg_r and name in share:
                    raise ConfigError(f"{name} given twice: in config= and in "
                                      f"share_group_configs=")
                value = cfg_r.get(name, share.get(name, base_r.get(name)))
                if value is not None:
                    share[name] = value
            else:
                value = cfg_r.get(name, base_r.get(name))
            if value is None:
                full[name] = default(name)
            else:
                full[name] = s.definition.parse(value)
                given.add(name)
            continue
        explicit = _differs(s, values[s.keyword], defaults[s.keyword])
        if name in cfg_r:
            if explicit:
                raise ConfigError(f"{name} given twice: in config= and as the {s.keyword}= "
                                  f"keyword")
            full[name] = cfg_r[name]
            kw[s.keyword] = s.keyword_value(cfg_r[name])
        elif explicit:
            full[name] = _shown(s, values[s.keyword])
        elif name in base_r:
            full[name] = base_r[name]
            kw[s.keyword] = s.keyword_value(base_r[name])
        else:
            full[name] = default(name)
            continue
        given.add(name)
    kw["share_group_configs"] = share
    kw["config"] = full
    kw["given"] = given
    return kw


def _differs(setting: Any, value: Any, default_value: Any) -> bool:
    """Was a keyword given (not at its default)? Compared as configs: ``super_users=[]`` is
    the default ``()``."""
    if value is default_value:
        return False
    try:
        return bool(setting.config_value(value) != setting.config_value(default_value))
    except (TypeError, ValueError, AttributeError):
        return bool(value != default_value)


def _shown(setting: Any, keyword_value: Any) -> Any:
    """A keyword's value as its config's (objects such as Listener lists show as given)."""
    try:
        return setting.definition.parse(setting.config_value(keyword_value))
    except (ConfigError, TypeError, ValueError):
        return keyword_value
