"""Authorization on kcodec's broker, Kafka's model: logged in as bob (SASL), a client cannot
read, write or delete alice's topic nor rewind or delete her group; with ACLs granted by a
super user it can. Each API answers its own *_AUTHORIZATION_FAILED code; Metadata hides the
topics a principal may not describe; ACLs survive a restart and a kill; confluent-kafka's and
kafka-python's admin clients manage them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from kcodec.broker import Cluster
from kcodec.broker.authorizer import Authorizer, allow, deny
from kcodec.broker.security import ListenerSecurity, PlainServer
from kcodec.protocol import (
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteGroupsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    FetchRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    ProduceRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from kcodec.protocol import ErrorCode as E
from kcodec.protocol.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kcodec.records import RecordBatchBuilder
from tests.support.broker_raw import Raw

USERS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}
TOPIC, GROUP = "alice-orders", "alice-group"


def sasl_raw(address: str, user: str) -> Raw:
    raw = Raw(address)
    assert raw.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
    r = raw.call(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{USERS[user]}".encode()), 2)
    assert r.error_code == 0, r
    return raw


def secured_cluster(**kw) -> Cluster:
    sec = ListenerSecurity(sasl={"PLAIN": lambda: PlainServer(USERS)})
    return Cluster(1, listeners="SASL_PLAINTEXT://127.0.0.1:0",
                   listener_security={"SASL_PLAINTEXT": sec}, **kw)


@pytest.fixture
def kb(tmp_path):
    with secured_cluster(authorizer=True, super_users=["User:admin"], data_dir=tmp_path,
                         auto_create_topics=False) as c:
        c.authorizer.add(allow("User:alice", "all", "topic", "alice-", prefixed=True),
                         allow("User:alice", "all", "group", "alice-", prefixed=True))
        yield c


def records(*values: bytes) -> bytes:
    b = RecordBatchBuilder()
    for v in values:
        b.append(None, v, [], int(time.time() * 1000))
    return b.build()


# ---------------------------------------------------------------- request helpers
def produce(raw: Raw, topic: str = TOPIC) -> int:
    P = ProduceRequest
    r = raw.call(P(acks=-1, timeout_ms=5000, topic_data=[P.TopicProduceData(name=topic, partition_data=[
        P.PartitionProduceData(index=0, records=records(b"v"))])]), 9)
    return r.responses[0].partition_responses[0].error_code


def fetch(raw: Raw, topic: str = TOPIC) -> tuple[int, bytes | None]:
    F = FetchRequest
    r = raw.call(F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
        F.FetchTopic(topic=topic, partitions=[F.FetchPartition(partition=0, fetch_offset=0,
                                                               partition_max_bytes=1 << 20)])]), 11)
    p = r.responses[0].partitions[0]
    return p.error_code, p.records


def list_offsets(raw: Raw, topic: str = TOPIC) -> int:
    L = ListOffsetsRequest
    r = raw.call(L(replica_id=-1, topics=[L.ListOffsetsTopic(name=topic, partitions=[
        L.ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 5)
    return r.topics[0].partitions[0].error_code


def metadata(raw: Raw, topics: list[str] | None = None, version: int = 9,
             create: bool = False) -> dict[str, int]:
    M = MetadataRequest
    r = raw.call(M(topics=None if topics is None else [M.MetadataRequestTopic(name=t) for t in topics],
                   allow_auto_topic_creation=create), version)
    return {t.name: t.error_code for t in r.topics}


def commit(raw: Raw, offset: int, group: str = GROUP, topic: str = TOPIC) -> int:
    OC = OffsetCommitRequest
    r = raw.call(OC(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        OC.OffsetCommitRequestTopic(name=topic, partitions=[
            OC.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])]), 7)
    return r.topics[0].partitions[0].error_code


def committed(raw: Raw, group: str = GROUP, topic: str = TOPIC) -> tuple[int, int]:
    OF = OffsetFetchRequest
    r = raw.call(OF(group_id=group, topics=[OF.OffsetFetchRequestTopic(name=topic,
                                                                        partition_indexes=[0])]), 5)
    if r.error_code:
        return r.error_code, -1
    p = r.topics[0].partitions[0]
    return p.error_code, p.committed_offset


def create_topic(raw: Raw, name: str) -> int:
    C = CreateTopicsRequest
    r = raw.call(C(topics=[C.CreatableTopic(name=name, num_partitions=1, replication_factor=1)],
                   timeout_ms=5000), 5)
    return r.topics[0].error_code


def delete_topic(raw: Raw, name: str = TOPIC) -> int:
    return raw.call(DeleteTopicsRequest(topic_names=[name], timeout_ms=5000), 3).responses[0].error_code


def delete_group(raw: Raw, group: str = GROUP) -> int:
    return raw.call(DeleteGroupsRequest(groups_names=[group]), 1).results[0].error_code


def grant(raw: Raw, *acls: AclBinding) -> list[int]:
    C = CreateAclsRequest
    r = raw.call(C(creations=[C.AclCreation(
        resource_type=a.resource_type, resource_name=a.resource_name,
        resource_pattern_type=a.pattern_type, principal=a.principal, host=a.host,
        operation=a.operation, permission_type=a.permission) for a in acls]), 2)
    return [x.error_code for x in r.results]


def alice_sets_up(address: str) -> None:
    with sasl_raw(address, "alice") as alice:
        assert create_topic(alice, TOPIC) == 0
        assert produce(alice) == 0 and produce(alice) == 0
        assert commit(alice, 2) == 0
        assert committed(alice) == (0, 2)


# ---------------------------------------------------------------- the story of bob
def test_bob_cannot_touch_alices_topic_or_group_until_granted(kb):
    address = kb.bootstrap
    alice_sets_up(address)
    with sasl_raw(address, "bob") as bob:
        assert produce(bob) == E.TOPIC_AUTHORIZATION_FAILED
        assert fetch(bob)[0] == E.TOPIC_AUTHORIZATION_FAILED
        assert list_offsets(bob) == E.TOPIC_AUTHORIZATION_FAILED
        assert TOPIC not in metadata(bob)                        # all topics: not listed
        assert metadata(bob, [TOPIC]) == {TOPIC: E.TOPIC_AUTHORIZATION_FAILED}
        assert metadata(bob, ["no-such-topic"]) == {"no-such-topic": E.TOPIC_AUTHORIZATION_FAILED}
        assert delete_topic(bob) == E.TOPIC_AUTHORIZATION_FAILED
        assert commit(bob, 0) == E.GROUP_AUTHORIZATION_FAILED     # rewind her group
        assert committed(bob)[0] == E.GROUP_AUTHORIZATION_FAILED
        assert delete_group(bob) == E.GROUP_AUTHORIZATION_FAILED
    assert TOPIC in kb.state.topics
    with sasl_raw(address, "alice") as alice:
        assert committed(alice) == (0, 2)                        # untouched
        assert fetch(alice)[0] == 0
    # a super user grants bob what he needs, step by step
    with sasl_raw(address, "admin") as admin:
        assert grant(admin, allow("User:bob", "read", "topic", TOPIC),
                     allow("User:bob", "read", "group", GROUP)) == [0, 0]
    with sasl_raw(address, "bob") as bob:
        code, data = fetch(bob)
        assert code == 0 and data
        assert list_offsets(bob) == 0
        assert metadata(bob)[TOPIC] == 0                         # READ implies DESCRIBE
        assert produce(bob) == E.TOPIC_AUTHORIZATION_FAILED       # READ is not WRITE
        assert commit(bob, 0) == 0                               # now he may rewind it
        assert committed(bob) == (0, 0)
        assert delete_group(bob) == E.GROUP_AUTHORIZATION_FAILED
    with sasl_raw(address, "admin") as admin:
        assert grant(admin, allow("User:bob", "write", "topic", TOPIC),
                     allow("User:bob", "delete", "topic", TOPIC),
                     allow("User:bob", "delete", "group", GROUP)) == [0, 0, 0]
    with sasl_raw(address, "bob") as bob:
        assert produce(bob) == 0
        assert delete_group(bob) == 0
        assert delete_topic(bob) == 0
    assert TOPIC not in kb.state.topics


def test_a_deny_wins_over_an_allow(kb):
    alice_sets_up(kb.bootstrap)
    kb.authorizer.add(allow("User:bob", "all", "topic", "alice-", prefixed=True),
                      deny("User:bob", "write", "topic", TOPIC))
    with sasl_raw(kb.bootstrap, "bob") as bob:
        assert fetch(bob)[0] == 0
        assert produce(bob) == E.TOPIC_AUTHORIZATION_FAILED


def test_every_api_answers_its_own_authorization_error(kb):
    """Bob has no ACL at all: each API says which kind of resource it was refused."""
    alice_sets_up(kb.bootstrap)
    J = JoinGroupRequest
    with sasl_raw(kb.bootstrap, "bob") as bob:
        calls = {
            "CreateTopics": (create_topic(bob, "bob-topic"), E.TOPIC_AUTHORIZATION_FAILED),
            "CreatePartitions": (bob.call(CreatePartitionsRequest(topics=[
                CreatePartitionsRequest.CreatePartitionsTopic(name=TOPIC, count=3)],
                timeout_ms=5000), 2).results[0].error_code, E.TOPIC_AUTHORIZATION_FAILED),
            "DeleteRecords": (bob.call(DeleteRecordsRequest(topics=[
                DeleteRecordsRequest.DeleteRecordsTopic(name=TOPIC, partitions=[
                    DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=1)])],
                timeout_ms=5000), 1).topics[0].partitions[0].error_code,
                E.TOPIC_AUTHORIZATION_FAILED),
            "DescribeConfigs(topic)": (bob.call(DescribeConfigsRequest(resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=2, resource_name=TOPIC)]), 1).results[0].error_code,
                E.TOPIC_AUTHORIZATION_FAILED),
            "DescribeConfigs(broker)": (bob.call(DescribeConfigsRequest(resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=4, resource_name="0")]), 1).results[0].error_code,
                E.CLUSTER_AUTHORIZATION_FAILED),
            "FindCoordinator(group)": (bob.call(FindCoordinatorRequest(key=GROUP, key_type=0),
                                                2).error_code, E.GROUP_AUTHORIZATION_FAILED),
            "FindCoordinator(txn)": (bob.call(FindCoordinatorRequest(key="tx", key_type=1),
                                              2).error_code,
                                     E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
            "JoinGroup": (bob.call(J(group_id=GROUP, session_timeout_ms=10000,
                                     rebalance_timeout_ms=10000, member_id="",
                                     protocol_type="consumer", protocols=[
                                         J.JoinGroupRequestProtocol(name="range", metadata=b"")]),
                                   5).error_code, E.GROUP_AUTHORIZATION_FAILED),
            "DescribeGroups": (bob.call(DescribeGroupsRequest(groups=[GROUP]), 3)
                               .groups[0].error_code, E.GROUP_AUTHORIZATION_FAILED),
            "OffsetDelete": (bob.call(OffsetDeleteRequest(group_id=GROUP, topics=[
                OffsetDeleteRequest.OffsetDeleteRequestTopic(name=TOPIC, partitions=[
                    OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
                .error_code, E.GROUP_AUTHORIZATION_FAILED),
            "InitProducerId(idempotent)": (bob.call(InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=60000), 4).error_code,
                E.CLUSTER_AUTHORIZATION_FAILED),
            "InitProducerId(transactional)": (bob.call(InitProducerIdRequest(
                transactional_id="tx", transaction_timeout_ms=60000), 4).error_code,
                E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
            "CreateAcls": (grant(bob, allow("User:bob", "all", "topic", "*"))[0],
                           E.CLUSTER_AUTHORIZATION_FAILED),
            "DescribeAcls": (bob.call(DescribeAclsRequest(
                resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                principal_filter=None, host_filter=None, operation=1, permission_type=1),
                2).error_code, E.CLUSTER_AUTHORIZATION_FAILED),
            "DeleteAcls": (bob.call(DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
                resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                principal_filter=None, host_filter=None, operation=1, permission_type=1)]), 2)
                .filter_results[0].error_code, E.CLUSTER_AUTHORIZATION_FAILED),
        }
        got = {k: E(v[0]).name for k, v in calls.items()}
        assert got == {k: E(v[1]).name for k, v in calls.items()}
        assert bob.call(ListGroupsRequest(), 3).groups == []      # her group is not listed
    with sasl_raw(kb.bootstrap, "alice") as alice:
        assert [g.group_id for g in alice.call(ListGroupsRequest(), 3).groups] == [GROUP]
    assert kb.state.topics[TOPIC].partitions[0].log.log_start_offset == 0
    assert len(kb.state.topics[TOPIC].partitions) == 1


def test_idempotent_producer_needs_write_on_some_topic_or_idempotent_write(kb):
    with sasl_raw(kb.bootstrap, "alice") as alice:      # WRITE on alice-* (KIP-679)
        assert alice.call(InitProducerIdRequest(transactional_id=None,
                                                transaction_timeout_ms=60000), 4).error_code == 0
    kb.authorizer.add(allow("User:bob", "idempotent_write", "cluster"))
    with sasl_raw(kb.bootstrap, "bob") as bob:
        assert bob.call(InitProducerIdRequest(transactional_id=None,
                                              transaction_timeout_ms=60000), 4).error_code == 0


def test_metadata_auto_creation_needs_create(tmp_path):
    with secured_cluster(authorizer=True, super_users="User:admin") as c:
        c.authorizer.add(allow("User:bob", "describe", "topic", "*"))
        with sasl_raw(c.bootstrap, "bob") as bob:
            assert metadata(bob, ["new-one"], create=True) == {
                "new-one": E.TOPIC_AUTHORIZATION_FAILED}
            assert "new-one" not in c.state.topics
        c.authorizer.add(allow("User:bob", "create", "topic", "new-", prefixed=True))
        with sasl_raw(c.bootstrap, "bob") as bob:
            assert metadata(bob, ["new-one"], create=True) == {"new-one": 0}
        assert "new-one" in c.state.topics


def test_authorized_operations_are_reported(kb):
    alice_sets_up(kb.bootstrap)
    M = MetadataRequest
    with sasl_raw(kb.bootstrap, "bob") as bob:
        kb.authorizer.add(allow("User:bob", "read", "topic", TOPIC))
        r = bob.call(M(topics=[M.MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=False,
                       include_topic_authorized_operations=True), 9)
        ops = r.topics[0].topic_authorized_operations
        assert ops == (1 << AclOperation.READ) | (1 << AclOperation.DESCRIBE)
        d = bob.call(DescribeGroupsRequest(groups=[GROUP], include_authorized_operations=True), 3)
        assert d.groups[0].error_code == E.GROUP_AUTHORIZATION_FAILED


def test_without_an_authorizer_acl_apis_say_security_is_disabled():
    with Cluster(1) as c, Raw(c.bootstrap) as raw:
        assert grant(raw, allow("User:bob", "read", "topic", "t")) == [E.SECURITY_DISABLED]
        r = raw.call(DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None,
                                         pattern_type_filter=1, principal_filter=None,
                                         host_filter=None, operation=1, permission_type=1), 2)
        assert r.error_code == E.SECURITY_DISABLED and "Authorizer" in r.error_message


def test_invalid_acls_are_refused_one_by_one(kb):
    with sasl_raw(kb.bootstrap, "admin") as admin:
        bad_cluster = AclBinding(ResourceType.CLUSTER, "other", PatternType.LITERAL, "User:bob",
                                 "*", AclOperation.ALTER, AclPermissionType.ALLOW)
        no_type = AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, "bob", "*",
                             AclOperation.READ, AclPermissionType.ALLOW)
        match = AclBinding(ResourceType.TOPIC, "t", PatternType.MATCH, "User:bob", "*",
                           AclOperation.READ, AclPermissionType.ALLOW)
        good = allow("User:bob", "read", "topic", "t")
        assert grant(admin, bad_cluster, no_type, match, good) == [
            E.INVALID_REQUEST, E.INVALID_REQUEST, E.INVALID_REQUEST, 0]
    assert kb.authorizer.acls(AclBindingFilter(principal="User:bob")) == [good]


def test_plaintext_connections_are_anonymous(tmp_path):
    with Cluster(1, authorizer=True) as c:
        c.create_topic("t", 1)
        with Raw(c.bootstrap) as raw:
            assert produce(raw, "t") == E.TOPIC_AUTHORIZATION_FAILED
        c.authorizer.add(allow("User:ANONYMOUS", "write", "topic", "t", host="127.0.0.1"))
        with Raw(c.bootstrap) as raw:
            assert produce(raw, "t") == 0
        c.authorizer.add(allow("User:ANONYMOUS", "read", "topic", "t", host="10.9.9.9"))
        with Raw(c.bootstrap) as raw:      # that ACL is for another host
            assert fetch(raw, "t")[0] == E.TOPIC_AUTHORIZATION_FAILED


def test_acls_survive_a_restart(tmp_path):
    with secured_cluster(authorizer=True, super_users=["User:admin"], data_dir=tmp_path) as c:
        with sasl_raw(c.bootstrap, "admin") as admin:
            assert grant(admin, allow("User:bob", "read", "topic", "x-", prefixed=True)) == [0]
    assert json.loads((tmp_path / "acls.json").read_text())["acls"]
    with secured_cluster(authorizer=True, super_users=["User:admin"], data_dir=tmp_path) as c:
        assert c.authorizer.acls() == [allow("User:bob", "read", "topic", "x-", prefixed=True)]
    (tmp_path / "acls.json").write_text("{not json")
    with pytest.raises(ValueError, match="acls.json"):
        secured_cluster(authorizer=True, data_dir=tmp_path).start()


def test_acls_survive_sigkill(tmp_path):
    """`kcodec broker --authorizer`: ACLs made over the wire are there after kill -9."""
    users = tmp_path / "users"
    users.write_text("".join(f"{u}:{p}\n" for u, p in USERS.items()))
    data = tmp_path / "data"

    def start() -> tuple[subprocess.Popen, str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kcodec", "broker", "--json", "--data-dir", str(data),
             "--listeners", "SASL_PLAINTEXT://127.0.0.1:0", "--sasl-users", str(users),
             "--sasl-mechanisms", "PLAIN", "--authorizer", "--super-users", "User:admin"],
            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        line = proc.stdout.readline() if proc.stdout else ""
        assert line, "the broker did not start"
        return proc, json.loads(line)["bootstrap"]

    proc, address = start()
    try:
        with sasl_raw(address, "admin") as admin:
            assert grant(admin, allow("User:bob", "read", "topic", "kept")) == [0]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    proc, address = start()
    try:
        with sasl_raw(address, "admin") as admin:
            r = admin.call(DescribeAclsRequest(
                resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                principal_filter="User:bob", host_filter=None, operation=1, permission_type=1), 2)
            assert r.error_code == 0
            assert [(x.resource_name, [a.operation for a in x.acls]) for x in r.resources] == [
                ("kept", [AclOperation.READ])]
    finally:
        proc.terminate()
        proc.wait(10)


# ---------------------------------------------------------------- the authorizer's rules
def test_rules_literal_prefixed_wildcard_implied_and_hosts():
    a = Authorizer(super_users=["User:root"])
    a.add(allow("User:alice", "read", "topic", "logs-", prefixed=True),
          allow("User:alice", "write", "topic", "exact"),
          allow("User:*", "describe", "topic", "public"),
          allow("User:carol", "all", "topic", "*"),
          deny("User:carol", "delete", "topic", "precious"),
          allow("User:dave", "alter_configs", "topic", "conf", host="10.0.0.1"))
    ok = a.authorize
    T, R, W, D, DC = ResourceType.TOPIC, AclOperation.READ, AclOperation.WRITE, \
        AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS
    assert ok("User:alice", "h", R, T, "logs-2024")
    assert not ok("User:alice", "h", R, T, "log")               # not the prefix
    assert ok("User:alice", "h", D, T, "logs-x")                # READ implies DESCRIBE
    assert ok("User:alice", "h", W, T, "exact") and not ok("User:alice", "h", W, T, "exactly")
    assert ok("User:bob", "h", D, T, "public") and not ok("User:bob", "h", R, T, "public")
    assert ok("User:carol", "h", AclOperation.DELETE, T, "anything")
    assert not ok("User:carol", "h", AclOperation.DELETE, T, "precious")   # deny wins
    assert ok("User:carol", "h", R, T, "precious")                         # only DELETE denied
    assert ok("User:dave", "10.0.0.1", DC, T, "conf")           # ALTER_CONFIGS implies it
    assert not ok("User:dave", "10.0.0.2", DC, T, "conf")       # another host
    assert ok("User:root", "h", AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster")
    assert not ok("User:erin", "h", R, T, "nobody-named-it")    # no ACL: denied by default
    assert not ok("User:alice", "h", R, ResourceType.GROUP, "logs-g")     # types are apart


def test_deny_read_does_not_deny_describe_and_allow_everyone_if_no_acl():
    a = Authorizer(allow_everyone_if_no_acl_found=True)
    a.add(deny("User:bob", "read", "topic", "t"), allow("User:bob", "all", "topic", "t"))
    assert not a.authorize("User:bob", "h", AclOperation.READ, ResourceType.TOPIC, "t")
    assert a.authorize("User:bob", "h", AclOperation.DESCRIBE, ResourceType.TOPIC, "t")
    assert not a.authorize("User:eve", "h", AclOperation.READ, ResourceType.TOPIC, "t")  # named
    assert a.authorize("User:eve", "h", AclOperation.READ, ResourceType.TOPIC, "u")      # not


def test_authorize_any_follows_kafka():
    a = Authorizer()
    W, T = AclOperation.WRITE, ResourceType.TOPIC
    assert not a.authorize_any("User:bob", "h", W, T)
    a.add(allow("User:bob", "write", "topic", "a-", prefixed=True))
    assert a.authorize_any("User:bob", "h", W, T)
    a.add(deny("User:bob", "write", "topic", "a", prefixed=True))    # covers a-
    assert not a.authorize_any("User:bob", "h", W, T)
    a.add(allow("User:bob", "write", "topic", "b"))
    assert a.authorize_any("User:bob", "h", W, T)
    a.add(deny("User:bob", "all", "topic", "*"))
    assert not a.authorize_any("User:bob", "h", W, T)


def test_filters_match_as_kafka():
    lit = allow("User:bob", "read", "topic", "orders")
    wild = allow("User:bob", "read", "topic", "*")
    pre = allow("User:bob", "read", "topic", "ord", prefixed=True)
    other = allow("User:amy", "write", "group", "orders")
    acls = [lit, wild, pre, other]

    def sel(**kw):
        f = AclBindingFilter(**kw)
        return [x for x in acls if f.matches(x)]
    assert sel() == acls
    assert sel(resource_type=ResourceType.TOPIC, resource_name="orders",
               pattern_type=PatternType.MATCH) == [lit, wild, pre]
    assert sel(resource_name="orders") == [lit, other]                 # ANY: the exact name
    assert sel(resource_name="ord", pattern_type=PatternType.PREFIXED) == [pre]
    assert sel(principal="User:amy") == [other]
    assert sel(operation=AclOperation.READ, permission=AclPermissionType.DENY) == []
    assert AclBindingFilter(operation=AclOperation.UNKNOWN).problem()


def test_super_users_must_be_principals():
    with pytest.raises(ValueError, match="Type:name"):
        Authorizer(super_users=["admin"])
    with pytest.raises(ValueError, match="authorizer=True"):
        Cluster(1, super_users=["User:admin"])


# ---------------------------------------------------------------- other clients
@pytest.mark.peers
def test_confluent_admin_manages_acls_and_a_denied_producer_is_told():
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka import admin as cka

    with secured_cluster(authorizer=True, super_users=["User:admin"]) as c:
        conf = {"bootstrap.servers": c.bootstrap, "security.protocol": "sasl_plaintext",
                "sasl.mechanism": "PLAIN"}
        admin = cka.AdminClient({**conf, "sasl.username": "admin", "sasl.password": "admin-pw"})
        topic = f"c-{uuid.uuid4().hex[:8]}"
        assert admin.create_topics([cka.NewTopic(topic, 1, 1)])[topic].result(15) is None
        binding = cka.AclBinding(cka.ResourceType.TOPIC, topic, cka.ResourcePatternType.LITERAL,
                                 "User:bob", "*", cka.AclOperation.WRITE,
                                 cka.AclPermissionType.ALLOW)
        prefixed = cka.AclBinding(cka.ResourceType.GROUP, "bob-", cka.ResourcePatternType.PREFIXED,
                                  "User:bob", "*", cka.AclOperation.READ,
                                  cka.AclPermissionType.ALLOW)
        bob_conf = {**conf, "sasl.username": "bob", "sasl.password": "bob-pw"}

        def bob_writes() -> object:
            p = ck.Producer({**bob_conf, "message.timeout.ms": 5000})
            out: list = []
            p.produce(topic, b"x", partition=0, on_delivery=lambda err, m: out.append(err))
            p.flush(10)
            return out[0] if out else "no report"
        err = bob_writes()
        assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
        for fut in admin.create_acls([binding, prefixed]).values():
            assert fut.result(15) is None
        got = admin.describe_acls(cka.AclBindingFilter(
            cka.ResourceType.ANY, None, cka.ResourcePatternType.ANY, "User:bob", None,
            cka.AclOperation.ANY, cka.AclPermissionType.ANY)).result(15)
        assert sorted(got, key=str) == sorted([binding, prefixed], key=str)
        assert bob_writes() is None
        deleted = admin.delete_acls([cka.AclBindingFilter(
            cka.ResourceType.TOPIC, topic, cka.ResourcePatternType.MATCH, None, None,
            cka.AclOperation.ANY, cka.AclPermissionType.ANY)])
        assert [list(f.result(15)) for f in deleted.values()] == [[binding]]
        assert c.authorizer.acls() == [allow("User:bob", "read", "group", "bob-", prefixed=True)]
        # bob may not manage ACLs
        bob_admin = cka.AdminClient(bob_conf)
        with pytest.raises(ck.KafkaException) as ei:
            list(bob_admin.create_acls([binding]).values())[0].result(15)
        assert ei.value.args[0].code() == ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED


@pytest.mark.peers
def test_kafka_python_admin_manages_acls():
    pytest.importorskip("kafka")
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KRT

    with secured_cluster(authorizer=True, super_users=["User:admin"]) as c:
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap, security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism="PLAIN", sasl_plain_username="admin",
                                 sasl_plain_password="admin-pw", request_timeout_ms=10000)
        try:
            acl = ACL(principal="User:bob", host="*", operation=ACLOperation.READ,
                      permission_type=ACLPermissionType.ALLOW,
                      resource_pattern=ResourcePattern(KRT.TOPIC, "kp-",
                                                       ACLResourcePatternType.PREFIXED))
            result = admin.create_acls([acl])
            assert result["failed"] == [] and len(result["succeeded"]) == 1
            flt = ACLFilter(principal="User:bob", host=None, operation=ACLOperation.ANY,
                            permission_type=ACLPermissionType.ANY,
                            resource_pattern=ResourcePatternFilter(KRT.ANY, None,
                                                                   ACLResourcePatternType.ANY))
            acls, _err = admin.describe_acls(flt)
            assert [(a.principal, a.resource_pattern.resource_name, a.operation) for a in acls] == [
                ("User:bob", "kp-", ACLOperation.READ)]
            deleted = admin.delete_acls([flt])
            assert len(deleted) == 1 and len(deleted[0][1]) == 1
            assert c.authorizer.acls() == []
        finally:
            admin.close()


def test_kcodec_client_as_bob_is_refused_then_served(kb):
    from kcodec.client import Consumer, Producer
    from kcodec.errors import KcodecError

    alice_sets_up(kb.bootstrap)
    sec = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
               sasl_username="bob", sasl_password="bob-pw", api_timeout_ms=10000,
               request_timeout_ms=5000)
    # an idempotent producer that may write nowhere is refused its producer id
    with pytest.raises(KcodecError, match="CLUSTER_AUTHORIZATION_FAILED"):
        Producer(bootstrap_servers=kb.bootstrap, **sec)
    with Producer(bootstrap_servers=kb.bootstrap, enable_idempotence=False, **sec) as p:
        with pytest.raises(KcodecError, match="TOPIC_AUTHORIZATION_FAILED"):
            p.send(TOPIC, b"bob was here", partition=0).result(10)
    kb.authorizer.add(allow("User:bob", "write", "topic", TOPIC),
                      allow("User:bob", "read", "topic", TOPIC),
                      allow("User:bob", "read", "group", "bob-", prefixed=True))
    with Producer(bootstrap_servers=kb.bootstrap, **sec) as p:
        assert p.send(TOPIC, b"bob was here", partition=0).result(10).offset == 2
    with Consumer(bootstrap_servers=kb.bootstrap, group_id="bob-readers",
                  auto_offset_reset="earliest", **sec) as c:
        c.subscribe([TOPIC])
        got: list[bytes] = []
        deadline = time.monotonic() + 15
        while len(got) < 3 and time.monotonic() < deadline:
            for recs in c.poll(0.5).values():
                got += [r.value for r in recs]
    assert got == [b"v", b"v", b"bob was here"]


def test_a_create_acls_of_more_than_ten_thousand_fails_whole(kb):
    # Kafka's controller refuses an operation of more than 10,000 records
    before = len(kb.authorizer.acls())
    many = [allow(f"User:u{i}", "read", "topic", f"t{i}") for i in range(10_001)]
    with sasl_raw(kb.bootstrap, "admin") as admin:
        C = CreateAclsRequest
        r = admin.call(C(creations=[C.AclCreation(
            resource_type=a.resource_type, resource_name=a.resource_name,
            resource_pattern_type=a.pattern_type, principal=a.principal, host=a.host,
            operation=a.operation, permission_type=a.permission) for a in many]), 2)
        assert {(x.error_code, x.error_message) for x in r.results} == {
            (E.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")}
        assert len(r.results) == 10_001
        assert len(kb.authorizer.acls()) == before
        assert grant(admin, *many[:3]) == [0, 0, 0]
    assert len(kb.authorizer.acls()) == before + 3


def test_a_delete_acls_removing_more_than_ten_thousand_fails_whole(kb):
    kb.authorizer.add(*[allow(f"User:u{i}", "read", "topic", f"t{i}") for i in range(10_001)])
    before = len(kb.authorizer.acls())
    D = DeleteAclsRequest
    f = AclBindingFilter(resource_type=ResourceType.TOPIC, pattern_type=PatternType.LITERAL)
    every_topic_acl = D.DeleteAclsFilter(
        resource_type_filter=f.resource_type, resource_name_filter=None,
        pattern_type_filter=f.pattern_type, principal_filter=None, host_filter=None,
        operation=AclOperation.ANY, permission_type=AclPermissionType.ANY)
    one = D.DeleteAclsFilter(
        resource_type_filter=f.resource_type, resource_name_filter="t7",
        pattern_type_filter=f.pattern_type, principal_filter=None, host_filter=None,
        operation=AclOperation.ANY, permission_type=AclPermissionType.ANY)
    with sasl_raw(kb.bootstrap, "admin") as admin:
        r = admin.call(D(filters=[one, every_topic_acl]), 2)
        assert [(x.error_code, x.error_message) for x in r.filter_results] == [
            (E.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")] * 2
        assert len(kb.authorizer.acls()) == before
        r = admin.call(D(filters=[one]), 2)
        assert r.filter_results[0].error_code == 0
        assert len(r.filter_results[0].matching_acls) == 1
    assert len(kb.authorizer.acls()) == before - 1
