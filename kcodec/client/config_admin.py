"""Configs seen and changed from an admin client (what ``Admin`` offers and
``kafka-configs.sh`` does): DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

    describe_configs           DescribeConfigs; a broker's own resource ("0") goes to that
                               broker, the rest to any broker
    alter_configs              AlterConfigs: each resource's whole new set of overrides
    incremental_alter_configs  IncrementalAlterConfigs: set / delete / append / subtract
                               per config (append and subtract for list configs)

A resource is ``ConfigResource("topic", "events")`` or a ``("topic", "events")`` tuple;
types are ``topic``, ``broker`` (name: a broker id, or "" for the cluster-wide default),
``group``, ``broker_logger`` and ``client_metrics``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kcodec.client.errors import KafkaError
from kcodec.client.net.cluster import Cluster
from kcodec.protocol import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)

__all__ = ["ConfigResource", "ConfigEntry", "AlterConfigOp", "RESOURCE_TYPES", "SOURCES"]

#: resource type names -> Kafka's ConfigResource.Type ids
RESOURCE_TYPES = {"topic": 2, "broker": 4, "broker_logger": 8, "client_metrics": 16,
                  "group": 32}
#: DescribeConfigs' config source ids -> Kafka's names
SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
           3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
           6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}
_TYPES = {0: "UNKNOWN", 1: "BOOLEAN", 2: "STRING", 3: "INT", 4: "SHORT", 5: "LONG",
          6: "DOUBLE", 7: "LIST", 8: "CLASS", 9: "PASSWORD"}
_OPS = {"set": 0, "delete": 1, "append": 2, "subtract": 3}


@dataclass(frozen=True)
class ConfigResource:
    """A config resource: its type (``topic``, ``broker``, ``group``, ...) and name."""

    type: str
    name: str

    def __post_init__(self) -> None:
        if self.type not in RESOURCE_TYPES:
            raise ValueError(f"config resource type {self.type!r}: expected one of "
                             f"{', '.join(RESOURCE_TYPES)}")

    @property
    def type_id(self) -> int:
        return RESOURCE_TYPES[self.type]


ResourceLike = ConfigResource | tuple


def resource(r: ResourceLike) -> ConfigResource:
    return r if isinstance(r, ConfigResource) else ConfigResource(*r)


@dataclass
class ConfigEntry:
    """One config of a resource as the broker describes it; ``source`` is Kafka's name
    (``DYNAMIC_TOPIC_CONFIG``, ``DEFAULT_CONFIG``, ...), ``synonyms`` (name, value, source)
    from the highest precedence down."""

    name: str
    value: str | None
    source: str = "UNKNOWN"
    read_only: bool = False
    sensitive: bool = False
    synonyms: list[tuple[str, str | None, str]] = field(default_factory=list)
    type: str = "UNKNOWN"
    documentation: str | None = None

    @property
    def is_default(self) -> bool:
        return self.source == "DEFAULT_CONFIG"


@dataclass(frozen=True)
class AlterConfigOp:
    """One change of IncrementalAlterConfigs: ``op`` is ``set``, ``delete``, ``append`` or
    ``subtract``."""

    name: str
    value: str | None = None
    op: str = "set"

    def __post_init__(self) -> None:
        if self.op not in _OPS:
            raise ValueError(f"config operation {self.op!r}: expected one of "
                             f"{', '.join(_OPS)}")


def _node_for(r: ConfigResource) -> int | None:
    """A broker's own configs are described and changed on that broker."""
    if r.type in ("broker", "broker_logger") and r.name.isdigit():
        return int(r.name)
    return None


async def _by_node(cluster: Cluster, resources: Iterable[ConfigResource]
                   ) -> dict[int | None, list[ConfigResource]]:
    out: dict[int | None, list[ConfigResource]] = {}
    for r in resources:
        out.setdefault(_node_for(r), []).append(r)
    if any(n is not None and n not in cluster.brokers for n in out):
        await cluster.refresh([])          # the brokers' addresses
    return out


async def describe_configs(cluster: Cluster, resources: Iterable[ResourceLike],
                           keys: Iterable[str] | None = None, include_synonyms: bool = True,
                           include_documentation: bool = False
                           ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
    """Every config of each resource (only ``keys`` if given), by name; ``KafkaError`` if
    the broker refuses a resource."""
    wanted = None if keys is None else list(keys)
    out: dict[ConfigResource, dict[str, ConfigEntry]] = {}
    Q = DescribeConfigsRequest
    for node, rs in (await _by_node(cluster, [resource(r) for r in resources])).items():
        req = Q(resources=[Q.DescribeConfigsResource(resource_type=r.type_id,
                                                     resource_name=r.name,
                                                     configuration_keys=wanted) for r in rs],
                include_synonyms=include_synonyms,
                include_documentation=include_documentation)

        async def go(node: int | None = node, req: Any = req) -> Any:
            return await cluster.request(node, req)
        body = await cluster.call(go, "DescribeConfigs")
        for r, res in zip(rs, body.results, strict=False):
            if res.error_code:
                raise KafkaError(res.error_code, f"describe configs of {r.type} {r.name!r}",
                                 res.error_message)
            out[r] = {c.name: ConfigEntry(
                c.name, c.value, SOURCES.get(c.config_source, "UNKNOWN"), c.read_only,
                c.is_sensitive, [(s.name, s.value, SOURCES.get(s.source, "UNKNOWN"))
                                 for s in c.synonyms],
                _TYPES.get(c.config_type, "UNKNOWN"), c.documentation or None)
                for c in res.configs}
    return out


async def alter_configs(cluster: Cluster, configs: Mapping[ResourceLike, Mapping[str, str]],
                        validate_only: bool = False) -> dict[ConfigResource, KafkaError | None]:
    """Replace each resource's overrides with ``configs[resource]`` (AlterConfigs: what is
    not named goes back to its default); the error (or None) per resource."""
    A = AlterConfigsRequest
    given = {resource(r): dict(c) for r, c in configs.items()}
    out: dict[ConfigResource, KafkaError | None] = {}
    for node, rs in (await _by_node(cluster, given)).items():
        req = A(resources=[A.AlterConfigsResource(
            resource_type=r.type_id, resource_name=r.name,
            configs=[A.AlterableConfig(name=k, value=v) for k, v in given[r].items()])
            for r in rs], validate_only=validate_only)

        async def go(node: int | None = node, req: Any = req) -> Any:
            return await cluster.request(node, req)
        body = await cluster.call(go, "AlterConfigs")
        for r, res in zip(rs, body.responses, strict=False):
            out[r] = KafkaError(res.error_code, f"alter configs of {r.type} {r.name!r}",
                                res.error_message) if res.error_code else None
    return out


async def incremental_alter_configs(cluster: Cluster,
                                    changes: Mapping[ResourceLike, Iterable[AlterConfigOp]],
                                    validate_only: bool = False
                                    ) -> dict[ConfigResource, KafkaError | None]:
    """Apply each resource's changes (IncrementalAlterConfigs); the error (or None) per
    resource."""
    Inc = IncrementalAlterConfigsRequest
    given = {resource(r): list(ops) for r, ops in changes.items()}
    out: dict[ConfigResource, KafkaError | None] = {}
    for node, rs in (await _by_node(cluster, given)).items():
        req = Inc(resources=[Inc.AlterConfigsResource(
            resource_type=r.type_id, resource_name=r.name,
            configs=[Inc.AlterableConfig(name=o.name, config_operation=_OPS[o.op],
                                         value=o.value) for o in given[r]])
            for r in rs], validate_only=validate_only)

        async def go(node: int | None = node, req: Any = req) -> Any:
            return await cluster.request(node, req)
        body = await cluster.call(go, "IncrementalAlterConfigs")
        for r, res in zip(rs, body.responses, strict=False):
            out[r] = KafkaError(res.error_code, f"alter configs of {r.type} {r.name!r}",
                                res.error_message) if res.error_code else None
    return out
