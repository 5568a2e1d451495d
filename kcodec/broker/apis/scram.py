"""DescribeUserScramCredentials (50) v0 and AlterUserScramCredentials (51) v0 (KIP-554),
over the broker's credential store (``kcodec.broker.security.scram_store``).

    Describe: DESCRIBE on the cluster; every user (users null) or the named ones, each
        with (mechanism, iterations); an unnamed user without credentials is
        RESOURCE_NOT_FOUND, a name given twice DUPLICATE_RESOURCE.
    Alter: ALTER on the cluster; upsertions carry the client's salt and SaltedPassword
        (the broker derives StoredKey and ServerKey; no password travels), deletions a
        mechanism. Kafka's checks: an empty name or iterations outside 4096..16384
        UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, a user
        named twice DUPLICATE_RESOURCE, deleting what does not exist RESOURCE_NOT_FOUND.
        A change is usable for the next login at once.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from kcodec.broker.apis.authz import Op, cluster_allowed
from kcodec.broker.apis.registry import Answer, Incoming, api
from kcodec.broker.security.sasl import ScramCredential
from kcodec.broker.security.scram_store import MECHANISMS
from kcodec.protocol import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    ErrorCode,
)
from kcodec.sasl.scram import HASHES, keys

if TYPE_CHECKING:
    from kcodec.broker.node import Node

__all__: list[str] = []

E = ErrorCode
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384


@api(DescribeUserScramCredentialsRequest, 0, 0)
def describe_user_scram_credentials(node: Node, req: Incoming[DescribeUserScramCredentialsRequest]
                                   ) -> Answer[DescribeUserScramCredentialsResponse]:
    R = DescribeUserScramCredentialsResponse
    if not cluster_allowed(node, req, Op.DESCRIBE):
        return R(error_code=E.CLUSTER_AUTHORIZATION_FAILED,
                 error_message="DescribeUserScramCredentials needs DESCRIBE on the cluster",
                 results=[])
    known = node.cluster.scram.users()
    names = list(known) if req.body.users is None else [u.name for u in req.body.users]
    counts = Counter(names)
    out = []
    for name in dict.fromkeys(names):
        if counts[name] > 1:
            out.append(R.DescribeUserScramCredentialsResult(
                user=name, error_code=E.DUPLICATE_RESOURCE,
                error_message="Cannot describe SCRAM credentials for the same user twice in "
                              "a single request", credential_infos=[]))
        elif name not in known:
            out.append(R.DescribeUserScramCredentialsResult(
                user=name, error_code=E.RESOURCE_NOT_FOUND,
                error_message="Attempt to describe a user credential that does not exist",
                credential_infos=[]))
        else:
            out.append(R.DescribeUserScramCredentialsResult(
                user=name, error_code=0, error_message=None, credential_infos=[
                    R.CredentialInfo(mechanism=m, iterations=i) for m, i in known[name]]))
    return R(error_code=0, error_message=None, results=out)


def _problem(name: str, mechanism: int, iterations: int | None) -> tuple[int, str] | None:
    if not name:
        return E.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISMS:
        return E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if iterations is not None and iterations < MIN_ITERATIONS:
        return E.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if iterations is not None and iterations > MAX_ITERATIONS:
        return E.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None


@api(AlterUserScramCredentialsRequest, 0, 0)
def alter_user_scram_credentials(node: Node, req: Incoming[AlterUserScramCredentialsRequest]
                                ) -> Answer[AlterUserScramCredentialsResponse]:
    R = AlterUserScramCredentialsResponse
    b = req.body
    users = [d.name for d in b.deletions] + [u.name for u in b.upsertions]
    if not cluster_allowed(node, req, Op.ALTER):
        return R(results=[R.AlterUserScramCredentialsResult(
            user=u, error_code=E.CLUSTER_AUTHORIZATION_FAILED,
            error_message="AlterUserScramCredentials needs ALTER on the cluster")
            for u in dict.fromkeys(users)])
    store = node.cluster.scram
    counts = Counter(users)
    errors: dict[str, tuple[int, str]] = {}
    for u in users:
        if counts[u] > 1:
            errors[u] = (E.DUPLICATE_RESOURCE,
                         "A user credential cannot be altered twice in the same request")
    for d in b.deletions:
        p = _problem(d.name, d.mechanism, None)
        if p is None and not store.has(d.name, MECHANISMS[d.mechanism]):
            p = (E.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
        if p is not None:
            errors.setdefault(d.name, p)
    upserts: list[tuple[str, str, ScramCredential]] = []
    for up in b.upsertions:
        p = _problem(up.name, up.mechanism, up.iterations)
        if p is None and (not up.salt or not up.salted_password):
            p = (E.UNACCEPTABLE_CREDENTIAL, "A credential needs a salt and a salted password")
        if p is not None:
            errors.setdefault(up.name, p)
            continue
        mech = MECHANISMS[up.mechanism]
        _, stored, server = keys(HASHES[mech], bytes(up.salted_password))
        upserts.append((up.name, mech, ScramCredential(bytes(up.salt), up.iterations, stored,
                                                      server)))
    store.change([x for x in upserts if x[0] not in errors],
                 [(d.name, MECHANISMS[d.mechanism]) for d in b.deletions
                  if d.name not in errors])
    return R(results=[R.AlterUserScramCredentialsResult(
        user=u, error_code=errors.get(u, (0, None))[0], error_message=errors.get(u, (0, None))[1])
        for u in dict.fromkeys(users)])
