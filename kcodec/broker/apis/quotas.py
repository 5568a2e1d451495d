"""DescribeClientQuotas (48) v0-1 and AlterClientQuotas (49) v0-1 (KIP-546) over the
broker's client quotas (``kcodec.broker.config.quotas``); v1 is flexible.

    Describe: DESCRIBE_CONFIGS on the cluster; components filter by entity type with match
        type exact (0), default (1) or any (2); ``strict`` leaves out entities with other
        types; a bad filter is INVALID_REQUEST with Kafka's message.
    Alter: ALTER_CONFIGS on the cluster; per entity INVALID_REQUEST for a bad entity, key
        or value (Kafka's checks), a key given twice, or an entity given twice;
        ``validate_only`` checks without changing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kcodec.broker.apis.authz import Op, cluster_allowed
from kcodec.broker.apis.registry import Answer, Incoming, api
from kcodec.broker.config.quotas import QuotaError, check_entity, check_value
from kcodec.protocol import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    ErrorCode,
)

if TYPE_CHECKING:
    from kcodec.broker.node import Node

__all__: list[str] = []

E = ErrorCode


@api(DescribeClientQuotasRequest, 0, 1)
def describe_client_quotas(node: Node, req: Incoming[DescribeClientQuotasRequest]
                          ) -> Answer[DescribeClientQuotasResponse]:
    R = DescribeClientQuotasResponse
    if not cluster_allowed(node, req, Op.DESCRIBE_CONFIGS):
        return R(error_code=E.CLUSTER_AUTHORIZATION_FAILED,
                 error_message="DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster",
                 entries=[])
    try:
        found = node.cluster.client_quotas.describe(
            [(c.entity_type, c.match_type, c.match) for c in req.body.components],
            req.body.strict)
    except QuotaError as exc:
        return R(error_code=E.INVALID_REQUEST, error_message=str(exc), entries=None)
    return R(error_code=0, error_message=None, entries=[R.EntryData(
        entity=[R.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        values=[R.ValueData(key=k, value=v) for k, v in sorted(values.items())])
        for entity, values in found])


@api(AlterClientQuotasRequest, 0, 1)
def alter_client_quotas(node: Node, req: Incoming[AlterClientQuotasRequest]
                       ) -> Answer[AlterClientQuotasResponse]:
    R = AlterClientQuotasResponse
    allowed = cluster_allowed(node, req, Op.ALTER_CONFIGS)
    results: list[tuple[Any, int, str | None]] = []
    changes: dict[Any, dict[str, float | None]] = {}
    seen: set[Any] = set()
    for entry in req.body.entries:
        raw = [(e.entity_type, e.entity_name) for e in entry.entity]
        if not allowed:
            results.append((entry.entity, E.CLUSTER_AUTHORIZATION_FAILED,
                            "AlterClientQuotas needs ALTER_CONFIGS on the cluster"))
            continue
        try:
            entity = check_entity(raw)
            if entity in seen:
                raise QuotaError(f"Ignoring duplicate entity {dict(entity)}")
            seen.add(entity)
            ops: dict[str, float | None] = {}
            for op in entry.ops:
                if op.key in ops:
                    raise QuotaError(f"Duplicate quota key {op.key} not updating quota for "
                                     f"this entity {dict(entity)}")
                if op.remove:
                    ops[op.key] = None
                else:
                    check_value(entity, op.key, op.value)
                    ops[op.key] = op.value
        except QuotaError as exc:
            results.append((entry.entity, E.INVALID_REQUEST, str(exc)))
            continue
        changes[entity] = ops
        results.append((entry.entity, 0, None))
    if changes and not req.body.validate_only:
        node.cluster.client_quotas.alter(changes)
    return R(entries=[R.EntryData(error_code=code, error_message=msg, entity=[
        R.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entity])
        for entity, code, msg in results])
