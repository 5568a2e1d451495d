"""SCRAM users seen and changed from an admin client (KIP-554, what ``Admin`` offers and
``kafka-configs.sh --entity-type users --alter --add-config SCRAM-SHA-256=[...]`` does):
DescribeUserScramCredentials and AlterUserScramCredentials.

The password never leaves the client: it is salted and hashed here (a random 32-byte salt,
PBKDF2 with the mechanism's hash and ``iterations``) and the broker gets the salt and the
SaltedPassword, from which it keeps StoredKey and ServerKey.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kcodec.client.errors import KafkaError
from kcodec.client.net.cluster import Cluster
from kcodec.protocol import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
)
from kcodec.sasl.scram import HASHES, salted_password

__all__ = ["ScramUpsertion", "ScramDeletion", "MECHANISMS"]

#: Kafka's ScramMechanism ids
MECHANISMS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
_NAMES = {v: k for k, v in MECHANISMS.items()}


@dataclass(frozen=True)
class ScramUpsertion:
    """Set ``user``'s credential for ``mechanism`` from ``password`` (salted here)."""

    user: str
    mechanism: str
    password: str
    iterations: int = 4096
    salt: bytes | None = None

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"SCRAM mechanism {self.mechanism!r}: expected SCRAM-SHA-256 or "
                             f"SCRAM-SHA-512")


@dataclass(frozen=True)
class ScramDeletion:
    """Remove ``user``'s credential for ``mechanism``."""

    user: str
    mechanism: str

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"SCRAM mechanism {self.mechanism!r}: expected SCRAM-SHA-256 or "
                             f"SCRAM-SHA-512")


async def describe_user_scram_credentials(cluster: Cluster, users: Iterable[str] | None = None
                                          ) -> dict[str, list[tuple[str, int]]]:
    """user -> [(mechanism, iterations)], every user or the named ones; ``KafkaError`` if
    the broker refuses, or names a user without credentials (RESOURCE_NOT_FOUND)."""
    Q = DescribeUserScramCredentialsRequest
    req = Q(users=None if users is None else [Q.UserName(name=u) for u in users])

    async def go() -> Any:
        return await cluster.request(None, req)
    body = await cluster.call(go, "DescribeUserScramCredentials")
    if body.error_code:
        raise KafkaError(body.error_code, "describe SCRAM users", body.error_message)
    out: dict[str, list[tuple[str, int]]] = {}
    for r in body.results:
        if r.error_code:
            raise KafkaError(r.error_code, f"describe SCRAM user {r.user!r}", r.error_message)
        out[r.user] = [(_NAMES.get(c.mechanism, str(c.mechanism)), c.iterations)
                       for c in r.credential_infos]
    return out


async def alter_user_scram_credentials(cluster: Cluster,
                                       changes: Iterable[ScramUpsertion | ScramDeletion]
                                       ) -> dict[str, KafkaError | None]:
    """Upsert and delete SCRAM credentials; the error (or None) per user."""
    A = AlterUserScramCredentialsRequest
    ups, dels = [], []
    for c in changes:
        if isinstance(c, ScramUpsertion):
            salt = c.salt if c.salt is not None else os.urandom(32)
            salted = salted_password(HASHES[c.mechanism], c.password, salt, c.iterations)
            ups.append(A.ScramCredentialUpsertion(name=c.user, mechanism=MECHANISMS[c.mechanism],
                                                  iterations=c.iterations, salt=salt,
                                                  salted_password=salted))
        else:
            dels.append(A.ScramCredentialDeletion(name=c.user, mechanism=MECHANISMS[c.mechanism]))
    if not ups and not dels:
        return {}
    req = A(deletions=dels, upsertions=ups)

    async def go() -> Any:
        return await cluster.request(None, req)
    body = await cluster.call(go, "AlterUserScramCredentials")
    return {r.user: KafkaError(r.error_code, f"alter SCRAM user {r.user!r}", r.error_message)
            if r.error_code else None for r in body.results}
