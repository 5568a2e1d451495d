"""Small helpers shared by the API handlers."""

from __future__ import annotations

import re
from typing import Any

from kcodec.protocol import ErrorCode

__all__ = ["valid_topic_name", "leader_error", "quota_client"]

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def valid_topic_name(name: str) -> str | None:
    """None if ``name`` is a legal topic name, else why not (Kafka's rules)."""
    if not name:
        return "the topic name is empty"
    if name in (".", ".."):
        return f"the topic name {name!r} is not allowed"
    if len(name) > 249:
        return "the topic name is longer than 249 characters"
    if not _LEGAL.match(name):
        return f"the topic name {name!r} has characters other than ASCII letters, digits, '.', '_', '-'"
    return None


def quota_client(req: Any) -> tuple[str, str]:
    """(user, client-id) of a request as the client quotas know it: the principal's name
    without its ``User:`` type."""
    principal = req.connection.principal
    user = principal[5:] if principal.startswith("User:") else principal
    return user, req.header.client_id or ""


def leader_error(node: Any, topic: str, index: int) -> tuple[int, Any]:
    """``(error_code, partition)``: the partition if this node leads it, else an error."""
    p = node.cluster.state.partition(topic, index)
    if p is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
    if p.leader != node.id:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
    return 0, p
