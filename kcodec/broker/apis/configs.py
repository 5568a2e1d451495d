"""DescribeConfigs, IncrementalAlterConfigs and AlterConfigs for the topic configs the log
honours (``kcodec.broker.log.LogConfig``) and the share-group configs of a GROUP resource
(``kcodec.broker.share.configs``); the broker resource describes as empty."""

from __future__ import annotations

from typing import Any

from kcodec.broker.apis.authz import RT, Op, allowed, cluster_allowed
from kcodec.broker.apis.registry import api
from kcodec.broker.apis.topics import KNOWN_CONFIGS
from kcodec.broker.log import LogConfig, LogError
from kcodec.protocol import (
    AlterConfigsResponse,
    DescribeConfigsResponse,
    ErrorCode,
    IncrementalAlterConfigsResponse,
)
from kcodec.protocol.acl import AclOperation

__all__: list[str] = []

TOPIC, BROKER, GROUP = 2, 4, 32


def _denied(node: Any, req: Any, op: AclOperation, r: Any) -> int:
    """0 if the request may ``op`` (DESCRIBE_CONFIGS or ALTER_CONFIGS) the config resource
    ``r``; else the error: a topic's configs need the operation on the topic, a group's on
    the group, the broker's (and the others') on the cluster."""
    if r.resource_type == TOPIC:
        ok = allowed(node, req, op, RT.TOPIC, r.resource_name)
        return 0 if ok else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if r.resource_type == GROUP:
        ok = allowed(node, req, op, RT.GROUP, r.resource_name)
        return 0 if ok else ErrorCode.GROUP_AUTHORIZATION_FAILED
    return 0 if cluster_allowed(node, req, op) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
DYNAMIC_TOPIC, DEFAULT, DYNAMIC_GROUP = 1, 5, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@api(32, 0, 4)
def describe_configs(node: Any, req: Any) -> Any:
    D = DescribeConfigsResponse
    state = node.cluster.state
    out = []
    for r in req.body.resources:
        denied = _denied(node, req, Op.DESCRIBE_CONFIGS, r)
        if denied:
            out.append(D.DescribeConfigsResult(error_code=denied, error_message=None,
                                               resource_type=r.resource_type,
                                               resource_name=r.resource_name, configs=[]))
            continue
        if r.resource_type == BROKER:
            out.append(D.DescribeConfigsResult(error_code=0, error_message=None, resource_type=r.resource_type,
                                               resource_name=r.resource_name, configs=[]))
            continue
        if r.resource_type == GROUP:
            out.append(_describe_group(node, r))
            continue
        topic = state.topics.get(r.resource_name) if r.resource_type == TOPIC else None
        if topic is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if r.resource_type == TOPIC else ErrorCode.INVALID_REQUEST
            out.append(D.DescribeConfigsResult(error_code=code, error_message=None,
                                               resource_type=r.resource_type,
                                               resource_name=r.resource_name, configs=[]))
            continue
        keys = None if r.configuration_keys is None else set(r.configuration_keys)
        values = topic.log_config().to_topic_configs()
        configs = [D.DescribeConfigsResourceResult(
            name=k, value=v, read_only=False, is_default=k not in topic.configs,
            config_source=DYNAMIC_TOPIC if k in topic.configs else DEFAULT, is_sensitive=False,
            synonyms=[], documentation=None)
            for k, v in sorted(values.items()) if keys is None or k in keys]
        out.append(D.DescribeConfigsResult(error_code=0, error_message=None, resource_type=TOPIC,
                                           resource_name=r.resource_name, configs=configs))
    return D(results=out)


def _describe_group(node: Any, r: Any) -> Any:
    """A group's configs: its overrides (a dynamic group config) and the defaults."""
    from kcodec.broker.share.configs import GROUP_CONFIGS

    D = DescribeConfigsResponse
    share = node.cluster.share.configs
    mine = share.overrides(r.resource_name)
    keys = None if r.configuration_keys is None else set(r.configuration_keys)
    configs = [D.DescribeConfigsResourceResult(
        name=k, value=mine.get(k, share.default(k)), read_only=False, is_default=k not in mine,
        config_source=DYNAMIC_GROUP if k in mine else DEFAULT, is_sensitive=False,
        synonyms=[], documentation=None)
        for k in sorted(GROUP_CONFIGS) if keys is None or k in keys]
    return D.DescribeConfigsResult(error_code=0, error_message=None, resource_type=GROUP,
                                   resource_name=r.resource_name, configs=configs)


def _alter_group(node: Any, r: Any, validate_only: bool) -> tuple[int, str | None]:
    from kcodec.broker.share.configs import ShareConfigError

    changes: dict[str, str | None] = {}
    for c in r.configs:
        if c.config_operation == SET and c.value is not None:
            changes[c.name] = c.value
        elif c.config_operation == DELETE:
            changes[c.name] = None
        else:
            return ErrorCode.INVALID_CONFIG, f"operation {c.config_operation} on {c.name!r}"
    try:
        node.cluster.share.configs.set(r.resource_name, changes, validate_only)
    except ShareConfigError as exc:
        return ErrorCode.INVALID_CONFIG, str(exc)
    return 0, None


def _apply(node: Any, name: str, new: dict[str, str], validate_only: bool) -> tuple[int, str | None]:
    for k in new:
        if k not in KNOWN_CONFIGS:
            return ErrorCode.INVALID_CONFIG, f"unknown or unsupported topic config {k!r}"
    try:
        LogConfig.from_topic_configs(new)
    except LogError as exc:
        return exc.error_code, str(exc)
    if not validate_only:
        node.cluster.state.set_configs(name, new)
    return 0, None


@api(44, 0, 1)
def incremental_alter_configs(node: Any, req: Any) -> Any:
    R = IncrementalAlterConfigsResponse
    state = node.cluster.state
    out = []
    for r in req.body.resources:
        code, msg = 0, None
        topic = state.topics.get(r.resource_name) if r.resource_type == TOPIC else None
        denied = _denied(node, req, Op.ALTER_CONFIGS, r)
        if denied:
            code, msg = denied, "ALTER_CONFIGS needed"
        elif r.resource_type == GROUP:
            code, msg = _alter_group(node, r, req.body.validate_only)
        elif topic is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if r.resource_type == TOPIC else ErrorCode.INVALID_REQUEST
            msg = "only topic and group configs can be changed"
        else:
            new = dict(topic.configs)
            for c in r.configs:
                if c.config_operation == SET and c.value is not None:
                    new[c.name] = c.value
                elif c.config_operation == DELETE:
                    new.pop(c.name, None)
                else:
                    code, msg = ErrorCode.INVALID_CONFIG, f"operation {c.config_operation} on {c.name!r}"
            if not code:
                code, msg = _apply(node, r.resource_name, new, req.body.validate_only)
        out.append(R.AlterConfigsResourceResponse(error_code=code, error_message=msg,
                                                  resource_type=r.resource_type,
                                                  resource_name=r.resource_name))
    return R(responses=out)


@api(33, 0, 2)
def alter_configs(node: Any, req: Any) -> Any:
    R = AlterConfigsResponse
    state = node.cluster.state
    out = []
    for r in req.body.resources:
        topic = state.topics.get(r.resource_name) if r.resource_type == TOPIC else None
        code: int
        msg: str | None
        denied = _denied(node, req, Op.ALTER_CONFIGS, r)
        if denied:
            code, msg = denied, "ALTER_CONFIGS needed"
        elif topic is None:
            code, msg = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "only topic configs can be changed"
        else:
            code, msg = _apply(node, r.resource_name,
                               {c.name: c.value for c in r.configs if c.value is not None},
                               req.body.validate_only)
        out.append(R.AlterConfigsResourceResponse(error_code=code, error_message=msg,
                                                  resource_type=r.resource_type,
                                                  resource_name=r.resource_name))
    return R(responses=out)
