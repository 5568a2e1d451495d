"""Client quotas seen and changed from an admin client (KIP-546, what ``Admin`` offers and
``kafka-configs.sh --entity-type users|clients|ips`` does): DescribeClientQuotas and
AlterClientQuotas.

An entity is a mapping of entity type (``user``, ``client-id``, ``ip``) to a name, None
for the default entity: ``{"user": "alice", "client-id": None}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kcodec.client.errors import KafkaError
from kcodec.client.net.cluster import Cluster
from kcodec.protocol import AlterClientQuotasRequest, DescribeClientQuotasRequest

__all__ = ["QuotaEntity", "entity_key"]

#: an entity as the results key it: sorted ((type, name or None), ...)
QuotaEntity = tuple[tuple[str, "str | None"], ...]
_MATCH = {"exact": 0, "default": 1, "any": 2}


def entity_key(entity: Mapping[str, str | None]) -> QuotaEntity:
    return tuple(sorted(entity.items()))


async def describe_client_quotas(cluster: Cluster,
                                 components: Iterable[tuple[str, str, str | None]] = (),
                                 strict: bool = False) -> dict[QuotaEntity, dict[str, float]]:
    """The quotas of the entities matching every (entity type, ``exact`` / ``default`` /
    ``any``, name) component (none: every entity); ``strict``: only entities with exactly
    those types. ``KafkaError`` if the broker refuses the filter."""
    Q = DescribeClientQuotasRequest
    comps = []
    for etype, match, name in components:
        if match not in _MATCH:
            raise ValueError(f"match {match!r}: expected exact, default or any")
        comps.append(Q.ComponentData(entity_type=etype, match_type=_MATCH[match],
                                     match=name if match == "exact" else None))
    req = Q(components=comps, strict=strict)

    async def go() -> Any:
        return await cluster.request(None, req)
    body = await cluster.call(go, "DescribeClientQuotas")
    if body.error_code:
        raise KafkaError(body.error_code, "describe client quotas", body.error_message)
    return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
            {v.key: v.value for v in entry.values} for entry in body.entries or []}


async def alter_client_quotas(cluster: Cluster,
                              changes: Mapping[QuotaEntity, Mapping[str, float | None]],
                              validate_only: bool = False) -> dict[QuotaEntity, KafkaError | None]:
    """Set (a value) or remove (None) quota keys per entity (an entity key or a mapping);
    the error (or None) per entity."""
    A = AlterClientQuotasRequest
    keyed = {entity_key(e) if isinstance(e, Mapping) else tuple(e): dict(ops)
             for e, ops in changes.items()}
    req = A(entries=[A.EntryData(
        entity=[A.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=[A.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None)
             for k, v in ops.items()]) for entity, ops in keyed.items()],
        validate_only=validate_only)

    async def go() -> Any:
        return await cluster.request(None, req)
    body = await cluster.call(go, "AlterClientQuotas")
    out: dict[QuotaEntity, KafkaError | None] = {}
    for entry in body.entries:
        key = tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity))
        out[key] = KafkaError(entry.error_code, f"alter client quotas of {dict(key)}",
                              entry.error_message) if entry.error_code else None
    return out
