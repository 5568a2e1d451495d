"""The authorizer: Kafka's ACL semantics (those of its StandardAuthorizer).

A request's principal (``User:alice``) from a host may do an operation on a resource when:

* the principal is a super user; or
* no DENY ACL applies and an ALLOW ACL does. An ACL applies when its resource pattern
  matches (LITERAL: the same name, or ``*``; PREFIXED: a prefix of the name), its principal
  is the request's or ``User:*``, its host the request's or ``*``, and its operation the one
  asked or ALL. An ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, and one of
  ALTER_CONFIGS also DESCRIBE_CONFIGS (a DENY implies nothing);
* or no ACL at all (for anyone) names the resource and ``allow_everyone_if_no_acl_found``
  is set (default off: with an authorizer, nothing is allowed until an ACL says so).

Denials are logged at INFO on ``kcodec.broker.authorizer`` (a filter that only hides what
may not be seen, as Metadata listing all topics, does not log).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from kcodec.broker.authorizer.store import AclStore
from kcodec.protocol.acl import (
    CLUSTER_NAME,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    split_principal,
)

__all__ = ["Authorizer", "SUPPORTED_OPERATIONS", "allow", "deny"]

log = logging.getLogger(__name__)

Op = AclOperation
RT = ResourceType

# the operations that apply to each resource type (Kafka's AclEntry.supportedOperations):
# the bits of the "authorized operations" fields of Metadata, DescribeGroups, ...
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    RT.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
               Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    RT.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE),
    RT.CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                 Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE),
    RT.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE),
    RT.DELEGATION_TOKEN: (Op.DESCRIBE,),
    RT.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}
_IMPLIES_DESCRIBE = frozenset((Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER))
_IMPLIES_DESCRIBE_CONFIGS = frozenset((Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS))


def _binding(permission: AclPermissionType, principal: str, operation: str | AclOperation,
             resource_type: str | ResourceType, name: str, prefixed: bool, host: str
             ) -> AclBinding:
    op = operation if isinstance(operation, AclOperation) else AclOperation.parse(operation)
    rt = (resource_type if isinstance(resource_type, ResourceType)
          else ResourceType.parse(resource_type))
    return AclBinding(rt, name, PatternType.PREFIXED if prefixed else PatternType.LITERAL,
                      principal, host, op, permission)


def allow(principal: str, operation: str | AclOperation, resource_type: str | ResourceType,
          name: str = CLUSTER_NAME, *, prefixed: bool = False, host: str = WILDCARD) -> AclBinding:
    """An ALLOW ACL: ``allow("User:bob", "read", "topic", "alice-")``."""
    return _binding(AclPermissionType.ALLOW, principal, operation, resource_type, name,
                    prefixed, host)


def deny(principal: str, operation: str | AclOperation, resource_type: str | ResourceType,
         name: str = CLUSTER_NAME, *, prefixed: bool = False, host: str = WILDCARD) -> AclBinding:
    """A DENY ACL (it wins over any ALLOW)."""
    return _binding(AclPermissionType.DENY, principal, operation, resource_type, name,
                    prefixed, host)


def _applies_to(acl: AclBinding, name: str) -> bool:
    if acl.pattern_type == PatternType.LITERAL:
        return acl.resource_name == name or acl.resource_name == WILDCARD
    return name.startswith(acl.resource_name)


def _grants(acl: AclBinding, operation: AclOperation) -> bool:
    """Does ``acl`` speak of ``operation`` (implied operations for ALLOW only)?"""
    if acl.operation == Op.ALL or acl.operation == operation:
        return True
    if acl.permission != AclPermissionType.ALLOW:
        return False
    if operation == Op.DESCRIBE:
        return acl.operation in _IMPLIES_DESCRIBE
    if operation == Op.DESCRIBE_CONFIGS:
        return acl.operation in _IMPLIES_DESCRIBE_CONFIGS
    return False


class Authorizer:
    """The ACL table and the decisions. ``super_users``: principals allowed everything
    (``User:admin``; Kafka's ``super.users``). Thread-safe: decisions read an immutable
    snapshot, changes replace it (and are written to the store first, when there is one)."""

    def __init__(self, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        users = [u.strip() for u in super_users if u.strip()]
        for u in users:
            if split_principal(u) is None:
                raise ValueError(f"super user {u!r} is not Type:name (User:admin)")
        self.super_users = frozenset(users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._lock = threading.Lock()
        self._acls: tuple[AclBinding, ...] = ()
        self._by_type: dict[ResourceType, tuple[AclBinding, ...]] = {}
        self.store: AclStore | None = None

    def __repr__(self) -> str:
        return (f"<Authorizer {len(self._acls)} ACLs, super users "
                f"{sorted(self.super_users) or 'none'}>")

    # ------------------------------------------------------------------ the table
    def open(self, store: AclStore | None) -> None:
        """Keep the ACLs in ``store`` from now on (loading what it holds, which replaces
        the table), or in memory only (None)."""
        with self._lock:
            self.store = store
            if store is not None:
                self._set(tuple(store.load()))

    def _set(self, acls: tuple[AclBinding, ...]) -> None:
        by_type: dict[ResourceType, list[AclBinding]] = {}
        for a in acls:
            by_type.setdefault(a.resource_type, []).append(a)
        self._acls = acls
        self._by_type = {k: tuple(v) for k, v in by_type.items()}

    def _commit(self, acls: tuple[AclBinding, ...]) -> None:
        """Write, then use (the caller holds the lock): an answer never promises an ACL the
        disk does not have."""
        if self.store is not None:
            self.store.save(list(acls))
        self._set(acls)

    def acls(self, filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """The ACLs ``filter`` matches (all without one), in the order they were made."""
        acls = self._acls
        return list(acls) if filter is None else [a for a in acls if filter.matches(a)]

    def create(self, bindings: Iterable[AclBinding]) -> list[str | None]:
        """Add ACLs; per binding None, or why it was refused (Kafka's rules). An ACL that
        exists already is not added twice."""
        bindings = list(bindings)
        results = [b.problem() for b in bindings]
        with self._lock:
            acls = list(self._acls)
            have = set(acls)
            for b, why in zip(bindings, results, strict=False):
                if why is None and b not in have:
                    acls.append(b)
                    have.add(b)
            if len(acls) != len(self._acls):
                self._commit(tuple(acls))
        return results

    def add(self, *bindings: AclBinding) -> None:
        """``create`` for code and tests: a refused binding is a ValueError."""
        for b, why in zip(bindings, self.create(bindings), strict=False):
            if why is not None:
                raise ValueError(f"cannot add ACL {b}: {why}")

    def delete(self, filters: Iterable[AclBindingFilter],
               max_removed: int | None = None) -> list[list[AclBinding] | str] | None:
        """Remove the ACLs each filter matches; per filter the ACLs it removed, or why the
        filter was refused. None, and nothing removed, if that would be more than
        ``max_removed`` ACLs."""
        filters = list(filters)
        out: list[list[AclBinding] | str] = []
        with self._lock:
            acls = list(self._acls)
            removed = 0
            for f in filters:
                why = f.problem()
                if why is not None:
                    out.append(why)
                    continue
                gone = [a for a in acls if f.matches(a)]
                if gone:
                    acls = [a for a in acls if not f.matches(a)]
                removed += len(gone)
                if max_removed is not None and removed > max_removed:
                    return None
                out.append(gone)
            if len(acls) != len(self._acls):
                self._commit(tuple(acls))
        return out

    # ------------------------------------------------------------------ decisions
    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str, *, log_denial: bool = True) -> bool:
        """May ``principal`` from ``host`` do ``operation`` on the resource?"""
        if principal in self.super_users:
            return True
        named = False
        allowed = False
        for acl in self._by_type.get(resource_type, ()):
            if not _applies_to(acl, name):
                continue
            named = True
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.host != WILDCARD and acl.host != host:
                continue
            if not _grants(acl, operation):
                continue
            if acl.permission == AclPermissionType.DENY:
                self._denied(principal, host, operation, resource_type, name, log_denial,
                             f"denied by {acl}")
                return False
            allowed = True
        if allowed:
            return True
        if not named and self.allow_everyone_if_no_acl_found:
            return True
        self._denied(principal, host, operation, resource_type, name, log_denial,
                     "no ACL allows it" if named else "no ACL names the resource")
        return False

    def _denied(self, principal: str, host: str, operation: AclOperation,
                resource_type: ResourceType, name: str, log_denial: bool, why: str) -> None:
        if log_denial:
            log.info("kcodec broker: %s from %s is denied %s on %s %r: %s", principal, host,
                     operation.name, resource_type.name, name, why)

    def authorize_any(self, principal: str, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """May ``principal`` do ``operation`` on at least one resource of the type (KIP-679:
        WRITE on some topic lets a producer be idempotent)? Kafka's rule: an ALLOW on some
        name that no DENY of the principal covers (a literal ``*`` DENY covers all)."""
        if self.authorize(principal, host, operation, resource_type, "hardcode",
                          log_denial=False):
            return True
        deny_literal: set[str] = set()
        deny_prefix: set[str] = set()
        allow_names: list[tuple[PatternType, str]] = []
        for acl in self._by_type.get(resource_type, ()):
            if acl.host != WILDCARD and acl.host != host:
                continue
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.operation != operation and acl.operation != Op.ALL:
                continue
            if acl.permission == AclPermissionType.DENY:
                if acl.pattern_type == PatternType.LITERAL:
                    if acl.resource_name == WILDCARD:
                        return False
                    deny_literal.add(acl.resource_name)
                else:
                    deny_prefix.add(acl.resource_name)
            elif acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD:
                return True
            else:
                allow_names.append((acl.pattern_type, acl.resource_name))
        for pattern, name in allow_names:
            if pattern == PatternType.LITERAL and name in deny_literal:
                continue
            if any(name[:i] in deny_prefix for i in range(1, len(name) + 1)):
                continue
            return True
        log.info("kcodec broker: %s from %s is denied %s on every %s", principal, host,
                 operation.name, resource_type.name)
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType,
                              name: str) -> int:
        """The bit field (1 << operation) of what the principal may do to the resource, as
        Metadata and DescribeGroups report it."""
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, op, resource_type, name, log_denial=False):
                bits |= 1 << int(op)
        return bits


def all_operations(resource_type: ResourceType) -> int:
    """The bit field of every operation of the type (what a broker without an authorizer
    reports)."""
    bits = 0
    for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
        bits |= 1 << int(op)
    return bits
