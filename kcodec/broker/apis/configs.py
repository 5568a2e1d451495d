"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: topic configs (Kafka 4.x's whole
set, ``kcodec.broker.config.topic``), group configs (``kcodec.broker.share.configs``) and
the broker's configs (``kcodec.broker.config.broker``).

    DescribeConfigs (32) v0-4: v1 config_source and synonyms (include_synonyms), is_default
        only in v0; v3 config_type and documentation (include_documentation); v4 flexible.
    AlterConfigs (33) v0-2: replaces a resource's whole set of overrides; v2 flexible.
    IncrementalAlterConfigs (44) v0-1: SET, DELETE, and APPEND / SUBTRACT for LIST configs
        (from the override, else the default), as Kafka; v1 flexible.

A refused value is INVALID_CONFIG with Kafka's message (``Invalid value X for configuration
NAME: REASON``, ``Unknown topic config name: NAME``); a config named twice in one resource
is INVALID_REQUEST.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kcodec.broker.apis.authz import RT, Op, allowed, cluster_allowed
from kcodec.broker.apis.registry import Answer, Incoming, api
from kcodec.broker.config import ConfigError
from kcodec.broker.config import topic as topic_configs
from kcodec.broker.log import LogConfig, LogError
from kcodec.protocol import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    ErrorCode,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kcodec.protocol.acl import AclOperation

if TYPE_CHECKING:
    from kcodec.broker.node import Node

__all__ = ["broker_levels", "check_topic_configs"]

TOPIC, BROKER, GROUP = 2, 4, 32
DYNAMIC_GROUP = 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
E = ErrorCode


def _denied(node: Any, req: Any, op: AclOperation, r: Any) -> int:
    """0 if the request may ``op`` (DESCRIBE_CONFIGS or ALTER_CONFIGS) the config resource
    ``r``; else the error: a topic's configs need the operation on the topic, a group's on
    the group, the broker's (and the others') on the cluster."""
    if r.resource_type == TOPIC:
        ok = allowed(node, req, op, RT.TOPIC, r.resource_name)
        return 0 if ok else E.TOPIC_AUTHORIZATION_FAILED
    if r.resource_type == GROUP:
        ok = allowed(node, req, op, RT.GROUP, r.resource_name)
        return 0 if ok else E.GROUP_AUTHORIZATION_FAILED
    return 0 if cluster_allowed(node, req, op) else E.CLUSTER_AUTHORIZATION_FAILED


def broker_levels(cluster: Any) -> list[tuple[int, dict[str, Any]]]:
    """The broker's config levels above Kafka's defaults, highest precedence first:
    (config source, {broker config name: typed value})."""
    return cluster.dynamic_configs.levels(None)


def check_topic_configs(cluster: Any, configs: dict[str, str],
                        small_segments: bool = False) -> tuple[int, str | None]:
    """0 and None if ``configs`` are a valid set of topic overrides; else INVALID_CONFIG (or
    the log's own error) and Kafka's message. ``small_segments``: segment.bytes may be below
    1 MiB (a test's topic, as Kafka's internal.segment.bytes)."""
    try:
        topic_configs.validate(configs, small_segments)
        LogConfig.from_topic_configs({**cluster.state.topic_defaults, **configs})
    except ConfigError as exc:
        return E.INVALID_CONFIG, str(exc)
    except LogError as exc:
        return exc.error_code, str(exc)
    return 0, None


def _result(r: Any, code: int, message: str | None, configs: list | None = None) -> Any:
    D = DescribeConfigsResponse
    return D.DescribeConfigsResult(error_code=code, error_message=message,
                                   resource_type=r.resource_type,
                                   resource_name=r.resource_name, configs=configs or [])


def _entry(req: Any, name: str, value: str | None, source: int, synonyms: list,
           type_: str, doc: str, read_only: bool = False, sensitive: bool = False) -> Any:
    D = DescribeConfigsResponse
    b = req.body
    return D.DescribeConfigsResourceResult(
        name=name, value=None if sensitive else value, read_only=read_only,
        is_default=source == topic_configs.DEFAULT, config_source=source,
        is_sensitive=sensitive,
        synonyms=[D.DescribeConfigsSynonym(name=n, value=v, source=s) for n, v, s in synonyms]
        if req.api_version >= 1 and b.include_synonyms else [],
        config_type=topic_configs.CONFIG_TYPES.get(type_, 0),
        documentation=doc if req.api_version >= 3 and b.include_documentation else None)


@api(DescribeConfigsRequest, 0, 4)
def describe_configs(node: Node, req: Incoming[DescribeConfigsRequest]
                    ) -> Answer[DescribeConfigsResponse]:
    D = DescribeConfigsResponse
    out = []
    for r in req.body.resources:
        denied = _denied(node, req, Op.DESCRIBE_CONFIGS, r)
        keys = None if r.configuration_keys is None else set(r.configuration_keys)
        if denied:
            out.append(_result(r, denied, None))
        elif r.resource_type == BROKER:
            out.append(_describe_broker(node, req, r, keys))
        elif r.resource_type == GROUP:
            out.append(_describe_group(node, req, r, keys))
        elif r.resource_type == TOPIC:
            out.append(_describe_topic(node, req, r, keys))
        else:
            out.append(_result(r, E.INVALID_REQUEST, f"resource type {r.resource_type} has "
                                                     f"no configs here"))
    return D(results=out)


def _describe_topic(node: Any, req: Any, r: Any, keys: set[str] | None) -> Any:
    topic = node.cluster.state.topics.get(r.resource_name)
    if topic is None:
        return _result(r, E.UNKNOWN_TOPIC_OR_PARTITION,
                       f"Topic {r.resource_name} does not exist")
    entries = [_entry(req, d.name, d.value, d.source, d.synonyms, d.type, d.doc)
               for d in topic_configs.describe(topic.configs, broker_levels(node.cluster))
               if keys is None or d.name in keys]
    return _result(r, 0, None, entries)


def _describe_broker(node: Any, req: Any, r: Any, keys: set[str] | None) -> Any:
    from kcodec.broker.config.dynamic import describe_broker

    try:
        entries = describe_broker(node.cluster, r.resource_name)
    except ConfigError as exc:
        return _result(r, E.INVALID_REQUEST, str(exc))
    return _result(r, 0, None, [
        _entry(req, d.name, d.value, d.source, d.synonyms, d.type, d.doc,
               read_only=d.read_only, sensitive=d.sensitive)
        for d in entries if keys is None or d.name in keys])


def _describe_group(node: Any, req: Any, r: Any, keys: set[str] | None) -> Any:
    """A group's configs: its overrides (a dynamic group config) and the defaults."""
    from kcodec.broker.share.configs import GROUP_CONFIGS

    share = node.cluster.share.configs
    mine = share.overrides(r.resource_name)
    entries = []
    for k in sorted(GROUP_CONFIGS):
        if keys is not None and k not in keys:
            continue
        source = DYNAMIC_GROUP if k in mine else topic_configs.DEFAULT
        value = mine.get(k, share.default(k))
        entries.append(_entry(req, k, value, source, [(k, value, source)],
                              "STRING" if k in ("share.auto.offset.reset",
                                                "share.isolation.level") else "INT", ""))
    return _result(r, 0, None, entries)


def _alter_group(node: Any, r: Any, changes: dict[str, str | None],
                 validate_only: bool) -> tuple[int, str | None]:
    from kcodec.broker.share.configs import ShareConfigError

    try:
        node.cluster.share.configs.set(r.resource_name, changes, validate_only)
    except ShareConfigError as exc:
        return E.INVALID_CONFIG, str(exc)
    return 0, None


def _alter_topic(node: Any, name: str, new: dict[str, str],
                 validate_only: bool) -> tuple[int, str | None]:
    code, msg = check_topic_configs(node.cluster, new)
    if not code and not validate_only:
        node.cluster.state.set_configs(name, new)
    return code, msg


def _duplicate(r: Any) -> str | None:
    names = [c.name for c in r.configs]
    dup = sorted({n for n in names if names.count(n) > 1})
    return f"Error due to duplicate config keys: {', '.join(dup)}" if dup else None


def _incremental(node: Any, r: Any, validate_only: bool) -> tuple[int, str | None]:
    state = node.cluster.state
    dup = _duplicate(r)
    if dup:
        return E.INVALID_REQUEST, dup
    if any(c.config_operation not in (SET, DELETE, APPEND, SUBTRACT) for c in r.configs):
        return E.INVALID_REQUEST, "Unknown alter config operation type"
    if r.resource_type == BROKER:
        from kcodec.broker.config.dynamic import alter_broker

        ops = [(c.name, c.config_operation, c.value) for c in r.configs]
        try:
            alter_broker(node.cluster, r.resource_name, ops, incremental=True,
                         validate_only=validate_only)
        except ConfigError as exc:
            return E.INVALID_CONFIG, str(exc)
        except LookupError as exc:
            return E.INVALID_REQUEST, str(exc.args[0])
        return 0, None
    if r.resource_type == GROUP:
        changes: dict[str, str | None] = {}
        for c in r.configs:
            if c.config_operation in (APPEND, SUBTRACT):
                verb = "append" if c.config_operation == APPEND else "subtract"
                return E.INVALID_CONFIG, f"Config value {verb} is not allowed for config " \
                                         f"key: {c.name}"
            changes[c.name] = c.value if c.config_operation == SET else None
        return _alter_group(node, r, changes, validate_only)
    if r.resource_type != TOPIC:
        return E.INVALID_REQUEST, f"resource type {r.resource_type} has no configs here"
    topic = state.topics.get(r.resource_name)
    if topic is None:
        return E.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {r.resource_name} does not exist"
    new = dict(topic.configs)
    defaults = {**_defaults_by_broker_name(node.cluster)}
    for c in r.configs:
        try:
            value = topic_configs.incremental(c.name, c.config_operation, c.value, new,
                                              defaults)
        except ConfigError as exc:
            return E.INVALID_CONFIG, str(exc)
        if value is None:
            new.pop(c.name, None)
        else:
            new[c.name] = value
    return _alter_topic(node, r.resource_name, new, validate_only)


def _defaults_by_broker_name(cluster: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for _source, values in reversed(broker_levels(cluster)):
        out.update(values)
    return out


@api(IncrementalAlterConfigsRequest, 0, 1)
def incremental_alter_configs(node: Node, req: Incoming[IncrementalAlterConfigsRequest]
                             ) -> Answer[IncrementalAlterConfigsResponse]:
    R = IncrementalAlterConfigsResponse
    out = []
    for r in req.body.resources:
        code: int
        msg: str | None
        denied = _denied(node, req, Op.ALTER_CONFIGS, r)
        if denied:
            code, msg = denied, "ALTER_CONFIGS needed"
        else:
            code, msg = _incremental(node, r, req.body.validate_only)
        out.append(R.AlterConfigsResourceResponse(error_code=code, error_message=msg,
                                                  resource_type=r.resource_type,
                                                  resource_name=r.resource_name))
    return R(responses=out)


def _alter(node: Any, r: Any, validate_only: bool) -> tuple[int, str | None]:
    dup = _duplicate(r)
    if dup:
        return E.INVALID_REQUEST, dup
    if r.resource_type == BROKER:
        from kcodec.broker.config.dynamic import alter_broker

        try:
            alter_broker(node.cluster, r.resource_name,
                         [(c.name, SET, c.value) for c in r.configs if c.value is not None],
                         incremental=False, validate_only=validate_only)
        except ConfigError as exc:
            return E.INVALID_CONFIG, str(exc)
        except LookupError as exc:
            return E.INVALID_REQUEST, str(exc.args[0])
        return 0, None
    if r.resource_type != TOPIC:
        return E.INVALID_REQUEST, f"resource type {r.resource_type} cannot be altered with " \
                                  f"AlterConfigs here; use IncrementalAlterConfigs"
    if r.resource_name not in node.cluster.state.topics:
        return E.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {r.resource_name} does not exist"
    return _alter_topic(node, r.resource_name,
                        {c.name: c.value for c in r.configs if c.value is not None},
                        validate_only)


@api(AlterConfigsRequest, 0, 2)
def alter_configs(node: Node, req: Incoming[AlterConfigsRequest]) -> Answer[AlterConfigsResponse]:
    R = AlterConfigsResponse
    out = []
    for r in req.body.resources:
        code: int
        msg: str | None
        denied = _denied(node, req, Op.ALTER_CONFIGS, r)
        if denied:
            code, msg = denied, "ALTER_CONFIGS needed"
        else:
            code, msg = _alter(node, r, req.body.validate_only)
        out.append(R.AlterConfigsResourceResponse(error_code=code, error_message=msg,
                                                  resource_type=r.resource_type,
                                                  resource_name=r.resource_name))
    return R(responses=out)
