"""Kafka's ACL model, shared by the broker's authorizer and clients' admin calls: resource
types, pattern types, operations and permissions numbered as the ACL APIs carry them
(DescribeAcls 29, CreateAcls 30, DeleteAcls 31), one ACL (:class:`AclBinding`) and a
filter over ACLs (:class:`AclBindingFilter`) with Kafka's matching rules.

One ACL on the wire (CreateAcls' creation, DescribeAcls' and DeleteAcls' rows)::

    resource_type int8   resource_name string   pattern_type int8 (v1+; LITERAL before)
    principal string ("Type:name", User:* for everyone)   host string (* for any)
    operation int8   permission_type int8

    >>> AclBinding(ResourceType.TOPIC, "orders-", PatternType.PREFIXED, "User:alice", "*",
    ...            AclOperation.READ, AclPermissionType.ALLOW).problem() is None
    True
    >>> AclBindingFilter(resource_name="orders-eu", pattern_type=PatternType.MATCH).matches(
    ...     AclBinding(ResourceType.TOPIC, "orders-", PatternType.PREFIXED, "User:alice", "*",
    ...                AclOperation.READ, AclPermissionType.ALLOW))
    True
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["ResourceType", "PatternType", "AclOperation", "AclPermissionType", "AclBinding",
           "AclBindingFilter", "CLUSTER_NAME", "WILDCARD", "WILDCARD_PRINCIPAL",
           "split_principal"]

CLUSTER_NAME = "kafka-cluster"          # the one name of the CLUSTER resource
WILDCARD = "*"                          # a LITERAL resource name or a host matching all
WILDCARD_PRINCIPAL = "User:*"           # the principal matching every principal


_E = TypeVar("_E", bound="_Named")


class _Named(enum.IntEnum):
    @classmethod
    def of(cls: type[_E], value: int) -> _E:
        """The member for a wire value; UNKNOWN for values Kafka does not define."""
        try:
            return cls(value)
        except ValueError:
            return cls(0)      # UNKNOWN is 0 in each of these enums

    @classmethod
    def parse(cls: type[_E], text: str) -> _E:
        """The member named ``text`` (any case, '-' for '_'): ``parse("transactional-id")``.
        A ValueError lists the names there are."""
        key = text.strip().upper().replace("-", "_")
        try:
            return cls[key]
        except KeyError:
            names = ", ".join(m.name.lower() for m in cls if m.name not in ("UNKNOWN",))
            raise ValueError(f"{text!r} is not a {cls.__name__} (one of {names})") from None


class ResourceType(_Named):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Named):
    UNKNOWN = 0
    ANY = 1             # filters only: any pattern type, the name exact
    MATCH = 2           # filters only: every ACL that applies to the named resource
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_Named):
    UNKNOWN = 0
    ANY = 1             # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_Named):
    UNKNOWN = 0
    ANY = 1             # filters only
    DENY = 2
    ALLOW = 3


def split_principal(principal: str) -> tuple[str, str] | None:
    """``("User", "alice")`` of ``"User:alice"``; None if it is not ``Type:name``."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        return None
    return kind, name


@dataclass(frozen=True)
class AclBinding:
    """One ACL: who (principal, host) may or may not (permission) do what (operation) to
    which resources (type, name, pattern type)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def problem(self) -> str | None:
        """Why this ACL cannot be created (Kafka's rules), or None."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            return f"invalid resource type {self.resource_type.name}"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return (f"invalid pattern type {self.pattern_type.name} (an ACL is LITERAL or "
                    "PREFIXED)")
        if self.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            return f"invalid operation {self.operation.name}"
        if self.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            return f"invalid permission type {self.permission.name} (ALLOW or DENY)"
        if not self.resource_name:
            return "the resource name is empty"
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            return f"the only name of the CLUSTER resource is {CLUSTER_NAME!r}"
        if split_principal(self.principal) is None:
            return (f"principal {self.principal!r} is not Type:name (User:alice, or User:* "
                    "for everyone)")
        if not self.host:
            return "the host is empty (* for any host)"
        return None

    def __str__(self) -> str:
        return (f"{self.permission.name} {self.principal} from {self.host} "
                f"{self.operation.name} on {self.resource_type.name}:"
                f"{self.pattern_type.name}:{self.resource_name}")


@dataclass(frozen=True)
class AclBindingFilter:
    """A filter over ACLs (DescribeAcls, DeleteAcls): None and ANY match anything; pattern
    type MATCH selects every ACL that applies to the named resource (the literal name, the
    ``*`` wildcard, prefixes of the name)."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def problem(self) -> str | None:
        """Why this filter cannot be used (an unknown type, operation or permission)."""
        for value in (self.resource_type, self.pattern_type, self.operation, self.permission):
            if value == 0:
                return f"the filter has an unknown {type(value).__name__}"
        return None

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) \
                and self.pattern_type != acl.pattern_type:
            return False
        if self.resource_name is not None:
            if self.pattern_type != PatternType.MATCH or self.pattern_type == acl.pattern_type:
                if self.resource_name != acl.resource_name:
                    return False
            elif acl.pattern_type == PatternType.LITERAL:
                if acl.resource_name not in (self.resource_name, WILDCARD):
                    return False
            elif acl.pattern_type == PatternType.PREFIXED:
                if not self.resource_name.startswith(acl.resource_name):
                    return False
            else:
                return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != acl.operation:
            return False
        return self.permission == AclPermissionType.ANY or self.permission == acl.permission
