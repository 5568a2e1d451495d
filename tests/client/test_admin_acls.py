"""Admin.create_acls / describe_acls / delete_acls on kcodec's broker with its authorizer,
and what the ACLs then do to another user's client."""

from __future__ import annotations

import asyncio

import pytest

from kcodec.client import Admin, AsyncAdmin, KafkaError, Producer
from kcodec.protocol import ErrorCode
from kcodec.protocol.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


def _acl(principal: str, op: AclOperation, name: str, pattern=PatternType.LITERAL,
         rtype=ResourceType.TOPIC, perm=AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


@pytest.fixture(scope="module")
def kb():
    from kcodec.broker import Cluster
    from kcodec.broker.security import ListenerSecurity
    from kcodec.broker.security.sasl import PlainServer

    sec = ListenerSecurity(sasl={"PLAIN": lambda: PlainServer(USERS)})
    with Cluster(1, listeners="SASL_PLAINTEXT://127.0.0.1:0",
                 listener_security={"SASL_PLAINTEXT": sec}, authorizer=True,
                 super_users=["User:admin"]) as c:
        yield c


def _as(kb, user: str) -> dict:
    return dict(bootstrap_servers=kb.bootstrap, security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="PLAIN", sasl_username=user, sasl_password=USERS[user],
                api_timeout_ms=10000)


def test_create_describe_delete(kb) -> None:
    mine = [_acl("User:alice", AclOperation.WRITE, "alice-", PatternType.PREFIXED),
            _acl("User:alice", AclOperation.DESCRIBE, "alice-", PatternType.PREFIXED),
            _acl("User:alice", AclOperation.CREATE, "alice-", PatternType.PREFIXED),
            _acl("User:bob", AclOperation.READ, "alice-orders",
                 perm=AclPermissionType.DENY)]
    with Admin(**_as(kb, "admin")) as admin:
        assert admin.create_acls(mine) == {a: None for a in mine}
        got = admin.describe_acls()
        assert set(mine) <= set(got)
        # a MATCH filter: everything that applies to one topic name
        applies = admin.describe_acls(AclBindingFilter(
            resource_type=ResourceType.TOPIC, resource_name="alice-orders",
            pattern_type=PatternType.MATCH))
        assert set(applies) == set(mine)
        only_bob = admin.describe_acls(AclBindingFilter(principal="User:bob"))
        assert only_bob == [mine[3]]

    # the ACLs now govern alice's client: she writes her prefix, not someone else's topic
    with Producer(**_as(kb, "alice"), linger_ms=0, delivery_timeout_ms=5000,
                  request_timeout_ms=2000) as p:
        assert p.send("alice-orders", b"x").result(10).offset == 0
        with pytest.raises(KafkaError) as e:
            p.send("bobs-topic", b"x").result(10)
        assert e.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED

    with Admin(**_as(kb, "admin")) as admin:
        f = AclBindingFilter(principal="User:alice")
        deleted = admin.delete_acls([f])
        assert set(deleted[f]) == set(mine[:3])
        assert admin.describe_acls(f) == []
        assert admin.delete_acls([f]) == {f: []}
        admin.delete_acls([AclBindingFilter()])
        assert admin.describe_acls() == []


def test_a_user_without_cluster_alter_is_refused(kb) -> None:
    with Admin(**_as(kb, "bob")) as admin:
        with pytest.raises(KafkaError) as e:
            admin.describe_acls()
        assert e.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        r = admin.create_acls([_acl("User:bob", AclOperation.ALL, "*")])
        err = next(iter(r.values()))
        assert err is not None and err.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_bad_acls_are_refused_before_sending(kb) -> None:
    with Admin(**_as(kb, "admin")) as admin:
        with pytest.raises(ValueError, match="cannot create ACL .*principal 'alice' is not "
                                             "Type:name"):
            admin.create_acls([_acl("alice", AclOperation.READ, "t")])
        with pytest.raises(ValueError, match="only name of the CLUSTER resource"):
            admin.create_acls([_acl("User:a", AclOperation.ALTER, "c",
                                    rtype=ResourceType.CLUSTER)])
        with pytest.raises(ValueError, match="bad ACL filter: the filter has an unknown"):
            admin.describe_acls(AclBindingFilter(operation=AclOperation.UNKNOWN))


def test_async_admin_and_a_broker_without_authorizer() -> None:
    from kcodec.broker import Cluster

    async def main(bootstrap: str) -> None:
        async with AsyncAdmin(bootstrap_servers=bootstrap) as admin:
            with pytest.raises(KafkaError) as e:
                await admin.describe_acls()
            assert e.value.code == ErrorCode.SECURITY_DISABLED

    with Cluster(1) as c:
        asyncio.run(main(c.bootstrap))
