"""DescribeClientQuotas / AlterClientQuotas (KIP-546) through Admin: Kafka's entity and
value checks, filters, removal, and the quotas kept in the data dir."""

from __future__ import annotations

import pytest

from kcodec.broker import Cluster
from kcodec.client import Admin, KafkaError
from kcodec.protocol import ErrorCode

E = ErrorCode
ALICE = (("user", "alice"),)
ALICE_APP = (("client-id", "app"), ("user", "alice"))
DEFAULT_USER = (("user", None),)


def test_set_describe_filter_remove_and_keep(tmp_path):
    with Cluster(data_dir=tmp_path) as c, Admin(bootstrap_servers=c.bootstrap) as admin:
        assert admin.alter_client_quotas({
            ALICE: {"producer_byte_rate": 1048576, "request_percentage": 12.5},
            ALICE_APP: {"consumer_byte_rate": 2048},
            DEFAULT_USER: {"producer_byte_rate": 1000},
            (("ip", "127.0.0.1"),): {"connection_creation_rate": 10}}) == {
            ALICE: None, ALICE_APP: None, DEFAULT_USER: None, (("ip", "127.0.0.1"),): None}
        everything = admin.describe_client_quotas()
        assert everything[ALICE] == {"producer_byte_rate": 1048576.0, "request_percentage": 12.5}
        assert len(everything) == 4
        assert set(admin.describe_client_quotas([("user", "exact", "alice")])) == {
            ALICE, ALICE_APP}
        assert set(admin.describe_client_quotas([("user", "exact", "alice")], strict=True)) \
            == {ALICE}
        assert set(admin.describe_client_quotas([("user", "default", None)])) == {DEFAULT_USER}
        assert set(admin.describe_client_quotas([("user", "any", None)], strict=True)) == {
            ALICE, DEFAULT_USER}
        assert admin.alter_client_quotas({ALICE: {"request_percentage": None}}) == {ALICE: None}
        assert admin.describe_client_quotas([("user", "exact", "alice")], strict=True) == {
            ALICE: {"producer_byte_rate": 1048576.0}}
        assert admin.alter_client_quotas({ALICE: {"producer_byte_rate": 5}},
                                         validate_only=True) == {ALICE: None}
    with Cluster(data_dir=tmp_path) as c, Admin(bootstrap_servers=c.bootstrap) as admin:
        assert admin.describe_client_quotas([("user", "exact", "alice")], strict=True) == {
            ALICE: {"producer_byte_rate": 1048576.0}}


@pytest.mark.parametrize("entity, ops, message", [
    ((("user", "a"),), {"connection_creation_rate": 1}, "Invalid configuration key "
                                                        "connection_creation_rate"),
    ((("ip", "127.0.0.1"),), {"producer_byte_rate": 1}, "Invalid configuration key "
                                                        "producer_byte_rate"),
    ((("user", "a"),), {"producer_byte_rate": 0}, "Quota producer_byte_rate must be greater "
                                                  "than 0"),
    ((("user", "a"),), {"producer_byte_rate": 1.5}, "producer_byte_rate cannot be a "
                                                    "fractional value."),
    ((("ip", "127.0.0.1"), ("user", "a")), {"producer_byte_rate": 1},
     "IP entity should not be combined with User or ClientId"),
    ((("group", "a"),), {"producer_byte_rate": 1}, "Unhandled client quota entity type: group"),
    ((("user", ""),), {"producer_byte_rate": 1}, "Empty user not supported"),
    ((), {"producer_byte_rate": 1}, "Invalid empty client quota entity"),
])
def test_kafkas_checks(entity, ops, message):
    with Cluster() as c, Admin(bootstrap_servers=c.bootstrap) as admin:
        (err,) = admin.alter_client_quotas({entity: ops}).values()
        assert err.code == E.INVALID_REQUEST and err.message.endswith(message)


def test_bad_filters_and_authorization():
    with Cluster() as c, Admin(bootstrap_servers=c.bootstrap) as admin:
        with pytest.raises(KafkaError) as err:
            admin.describe_client_quotas([("user", "any", None), ("user", "any", None)])
        assert err.value.code == E.INVALID_REQUEST and "more than once" in err.value.message
        with pytest.raises(KafkaError) as err:
            admin.describe_client_quotas([("ip", "any", None), ("user", "any", None)])
        assert err.value.code == E.INVALID_REQUEST
    with Cluster(authorizer=True) as c, Admin(bootstrap_servers=c.bootstrap) as admin:
        (err,) = admin.alter_client_quotas({ALICE: {"producer_byte_rate": 1}}).values()
        assert err.code == E.CLUSTER_AUTHORIZATION_FAILED
        with pytest.raises(KafkaError) as e:
            admin.describe_client_quotas()
        assert e.value.code == E.CLUSTER_AUTHORIZATION_FAILED


# ---------------------------------------------------------------- enforcement (KIP-13/219)
def test_the_quota_of_a_client_is_kafkas_first_level_that_sets_it():
    from kcodec.broker.config.quotas import PRODUCE, ClientQuotas

    q = ClientQuotas(None)
    q.alter({(("client-id", None),): {PRODUCE: 1.0}})
    assert q.bound(PRODUCE, "bob", "app") == (1.0, ("", "app"))      # each client-id apart
    q.alter({DEFAULT_USER: {PRODUCE: 2.0}})
    assert q.bound(PRODUCE, "bob", "app") == (2.0, ("bob", ""))
    q.alter({ALICE: {PRODUCE: 3.0}, ALICE_APP: {PRODUCE: 4.0}})
    assert q.bound(PRODUCE, "alice", "app") == (4.0, ("alice", "app"))
    assert q.bound(PRODUCE, "alice", "other") == (3.0, ("alice", ""))
    assert q.bound("consumer_byte_rate", "alice", "app") is None


def test_the_throttle_time_is_the_excess_over_the_measured_window():
    from kcodec.broker.config.quotas import PRODUCE, ClientQuotas

    q = ClientQuotas(None)
    q.alter({(("client-id", "app"),): {PRODUCE: 1000.0}})
    assert q.record(PRODUCE, "ANONYMOUS", "other", 10**6, now=100.0) == 0    # no quota
    assert q.record(PRODUCE, "ANONYMOUS", "app", 5000, now=100.0) == 0      # 5000 B / 10 s
    # 15000 B in 0.5 s, measured over 10.5 s (at least 10 whole windows, as Kafka's Rate):
    # the excess 15000 - 10500 B takes 4.5 s at the bound
    assert q.record(PRODUCE, "ANONYMOUS", "app", 10000, now=100.5) == 4500
    # the windows age out: 11 s later the rate is back under the bound
    assert q.record(PRODUCE, "ANONYMOUS", "app", 100, now=112.0) == 0


def _produce(raw, records, version):
    from kcodec.protocol import ProduceRequest as P

    return raw.call(P(acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name="t", partition_data=[P.PartitionProduceData(index=0, records=records)])]), version)


def test_produce_and_fetch_over_their_quota_are_throttled():
    import time

    from kcodec.protocol import FetchRequest as F
    from kcodec.records import RecordBatchBuilder
    from tests.support.broker_raw import Raw

    b = RecordBatchBuilder()
    b.append(b"k", b"x" * 110_000, [], int(time.time() * 1000))
    records = b.build()
    with Cluster() as c, Admin(bootstrap_servers=c.bootstrap) as admin:
        c.create_topic("t", 1)
        with Raw(c.bootstrap) as raw:
            assert _produce(raw, records, 9).throttle_time_ms == 0       # no quota yet
        admin.alter_client_quotas({(("client-id", None),): {"producer_byte_rate": 10_000,
                                                           "consumer_byte_rate": 10_000}})
        with Raw(c.bootstrap) as raw:
            r = _produce(raw, records, 9)
            # 110 KB against 10 KB/s measured over 10 s: about 1 s too much
            assert r.responses[0].partition_responses[0].error_code == 0
            assert 700 <= r.throttle_time_ms <= 1200
            req = F(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[F.FetchTopic(
                topic="t", partitions=[F.FetchPartition(partition=0, fetch_offset=0,
                                                        partition_max_bytes=1 << 20)])])
            t0 = time.monotonic()
            f = raw.call(req, 12)          # read only once the produce's throttle has passed
            assert time.monotonic() - t0 >= r.throttle_time_ms / 1000 * 0.9
            # its 220 KB answer is over the consumer quota (each quota apart)
            assert f.responses[0].partitions[0].records and 1000 <= f.throttle_time_ms <= 11000


def test_request_percentage_throttles_by_handler_time():
    # KIP-124: the time the broker spends on a client's requests, against its percentage
    from kcodec.protocol import MetadataRequest
    from tests.support.broker_raw import Raw

    with Cluster() as c, Admin(bootstrap_servers=c.bootstrap) as admin:
        c.create_topic("t", 4)
        admin.alter_client_quotas({(("client-id", "busy"),): {"request_percentage": 1e-9}})
        with Raw(c.bootstrap, client_id="busy") as raw:
            # any handler time is far above 1e-9 % of a thread over 10 s: throttled at once
            assert raw.call(MetadataRequest(topics=None), 12).throttle_time_ms > 0
        with Raw(c.bootstrap, client_id="idle") as raw:     # another client: no quota
            assert raw.call(MetadataRequest(topics=None), 12).throttle_time_ms == 0


# ---------------------------------------------------------------- controller mutations (KIP-599)
def test_the_mutation_quota_is_kafkas_token_bucket():
    from kcodec.broker.config.quotas import MUTATION, ClientQuotas

    q = ClientQuotas(None)          # 11 windows of 1 s: the bucket holds 22 at 2/s
    q.alter({ALICE: {MUTATION: 2.0}})
    assert q.mutate("bob", "app", 1000, strict=True, now=100.0) == (True, 0)     # no quota
    assert q.mutate("alice", "app", 10, strict=True, now=100.0) == (True, 0)     # 12 left
    assert q.mutate("alice", "app", 10, strict=True, now=100.0) == (True, 0)     # 2 left
    # the topic that takes the bucket below zero goes through, the next ones do not
    assert q.mutate("alice", "app", 10, strict=True, now=100.0) == (True, 0)     # -8
    assert q.mutate("alice", "other", 1, strict=True, now=100.0) == (False, 4000)
    assert q.mutate("alice", "app", 1, strict=True, now=102.0) == (False, 2000)  # refilled
    assert q.mutate("alice", "app", 1, strict=True, now=104.0) == (True, 0)      # at zero
    # permissive (an old version): counted, and throttled as soon as below zero
    assert q.mutate("alice", "app", 3, strict=False, now=105.0) == (True, 1000)  # -4 + 2 - 3
    # the bucket refills up to its burst, no further
    assert q.mutate("alice", "app", 23, strict=False, now=1000.0) == (True, 500)


def _create(raw, topics, version, validate_only=False):
    from kcodec.protocol import CreateTopicsRequest as C

    return raw.call(C(topics=[C.CreatableTopic(name=n, num_partitions=p, replication_factor=1)
                              for n, p in topics], timeout_ms=5000,
                      validate_only=validate_only), version)


def _grow(raw, topic, count, version, validate_only=False):
    from kcodec.protocol import CreatePartitionsRequest as P

    return raw.call(P(topics=[P.CreatePartitionsTopic(name=topic, count=count)],
                      timeout_ms=5000, validate_only=validate_only), version)


def _delete(raw, names, version):
    from kcodec.protocol import DeleteTopicsRequest as D

    return raw.call(D(topic_names=names, timeout_ms=5000), version)


#: a bucket of 20 mutations refilled at 20/s: 30 mutations leave it 0.5 s below zero
_MUTATIONS = {"controller.quota.window.num": 1}
_BY_CLIENT_ID = {(("client-id", None),): {"controller_mutation_rate": 20}}


def test_create_topics_over_the_mutation_quota_is_throttling_quota_exceeded():
    import time

    from tests.support.broker_raw import Raw

    with Cluster(config=_MUTATIONS) as c, Admin(bootstrap_servers=c.bootstrap) as admin:
        with Raw(c.bootstrap, client_id="app") as raw:     # no quota yet: nothing counted
            assert _create(raw, [("before", 100)], 7).topics[0].error_code == 0
        assert admin.alter_client_quotas({ALICE: {"controller_mutation_rate": 20},
                                          DEFAULT_USER: {"controller_mutation_rate": 20}}) \
            == {ALICE: None, DEFAULT_USER: None}
        # Admin (user ANONYMOUS, the default user's quota): the topic that crosses the
        # quota is created, the next is refused with Kafka's error and message
        assert admin.create_topics(["a"], num_partitions=30) == {"a": None}
        err = admin.create_topics(["b"], num_partitions=1)["b"]
        assert err.code == E.THROTTLING_QUOTA_EXCEEDED
        assert err.message == "The throttling quota has been exceeded."
        admin.alter_client_quotas({DEFAULT_USER: {"controller_mutation_rate": None}})
        admin.alter_client_quotas(_BY_CLIENT_ID)
        with Raw(c.bootstrap, client_id="app") as raw:
            r = _create(raw, [("c", 30), ("d", 1)], 7)    # per topic, within one request
            assert [(t.name, t.error_code) for t in r.topics] == [
                ("c", 0), ("d", E.THROTTLING_QUOTA_EXCEEDED)]
            assert r.topics[1].error_message == "The throttling quota has been exceeded."
            assert 400 <= r.throttle_time_ms <= 500 and "d" not in c.state.topics
            t0 = time.monotonic()
            # the connection is read again once the bucket is back at zero: created
            r = _create(raw, [("d", 1)], 6)
            assert time.monotonic() - t0 >= r.throttle_time_ms / 1000 * 0.9
            assert r.topics[0].error_code == 0 and r.throttle_time_ms == 0
        with Raw(c.bootstrap, client_id="other") as raw:     # each client-id apart
            assert _create(raw, [("e", 1)], 7).topics[0].error_code == 0


def test_create_partitions_and_delete_topics_count_the_partitions_they_add_and_delete():
    import time

    from tests.support.broker_raw import Raw

    with Cluster(config=_MUTATIONS) as c, Admin(bootstrap_servers=c.bootstrap) as admin:
        for name in ("t", "u", "v", "w"):
            c.create_topic(name, 30 if name in ("v", "w") else 1)
        admin.alter_client_quotas(_BY_CLIENT_ID)
        with Raw(c.bootstrap, client_id="app") as raw:
            r = _grow(raw, "t", 31, 3)                     # 30 added: through, 0.5 s below
            assert r.results[0].error_code == 0 and r.throttle_time_ms == 0
            r = _grow(raw, "u", 2, 3)
            assert r.results[0].error_code == E.THROTTLING_QUOTA_EXCEEDED
            assert r.results[0].error_message == "The throttling quota has been exceeded."
            # (less the time between the two requests)
            assert 0 < r.throttle_time_ms <= 500 and len(c.state.topics["u"].partitions) == 1
            t0 = time.monotonic()
            assert _grow(raw, "u", 2, 3).results[0].error_code == 0
            assert time.monotonic() - t0 >= r.throttle_time_ms / 1000 * 0.9
        with Raw(c.bootstrap, client_id="app2") as raw:
            r = _delete(raw, ["v", "w"], 5)                 # 30 deleted, then refused
            assert [(x.name, x.error_code) for x in r.responses] == [
                ("v", 0), ("w", E.THROTTLING_QUOTA_EXCEEDED)]
            assert r.responses[1].error_message == "The throttling quota has been exceeded."
            assert 400 <= r.throttle_time_ms <= 500 and "w" in c.state.topics
            assert _delete(raw, ["w"], 5).responses[0].error_code == 0
            assert "w" not in c.state.topics


def test_validate_only_counts_nothing():
    from tests.support.broker_raw import Raw

    with Cluster(config=_MUTATIONS) as c, Admin(bootstrap_servers=c.bootstrap) as admin:
        c.create_topic("t", 1)
        admin.alter_client_quotas(_BY_CLIENT_ID)
        with Raw(c.bootstrap, client_id="app") as raw:
            for _ in range(3):
                r = _create(raw, [("a", 30)], 7, validate_only=True)
                assert r.topics[0].error_code == 0 and r.throttle_time_ms == 0
                r = _grow(raw, "t", 31, 3, validate_only=True)
                assert r.results[0].error_code == 0 and r.throttle_time_ms == 0
            assert "a" not in c.state.topics
            # the bucket is still full: these 30 go through, what follows does not
            assert _create(raw, [("a", 30)], 7).topics[0].error_code == 0
            assert _create(raw, [("b", 1)], 7).topics[0].error_code == E.THROTTLING_QUOTA_EXCEEDED


def test_versions_before_kip_599_are_done_and_throttled():
    import time

    from tests.support.broker_raw import Raw

    with Cluster(config=_MUTATIONS) as c, Admin(bootstrap_servers=c.bootstrap) as admin:
        c.create_topic("t", 1)
        admin.alter_client_quotas(_BY_CLIENT_ID)
        with Raw(c.bootstrap, client_id="app") as raw:
            # CreateTopics v5: no error, throttled as soon as the bucket is below zero; the
            # client waits it out itself (KIP-219), the connection is held meanwhile
            r = _create(raw, [("a", 30)], 5)
            assert r.topics[0].error_code == 0 and 400 <= r.throttle_time_ms <= 500
            # read 0.5 s later, the bucket back at zero: 10 more, over the quota, still created
            r = _create(raw, [("b", 10)], 5)
            assert r.topics[0].error_code == 0 and "b" in c.state.topics
            assert 0 < r.throttle_time_ms <= 500
        with Raw(c.bootstrap, client_id="app2") as raw:
            # CreatePartitions v2, DeleteTopics v4: the same
            r = _grow(raw, "t", 31, 2)
            assert r.results[0].error_code == 0 and 400 <= r.throttle_time_ms <= 500
            # held 0.5 s after that answer, the bucket is back at zero: 30 deleted, 1.5 s
            r = _delete(raw, ["a"], 4)
            assert r.responses[0].error_code == 0 and 1000 <= r.throttle_time_ms <= 1500
        with Raw(c.bootstrap, client_id="app3") as raw:
            # CreateTopics v2, before KIP-219: the answer itself is held back
            t0 = time.monotonic()
            r = _create(raw, [("c", 30)], 2)
            assert r.topics[0].error_code == 0 and 400 <= r.throttle_time_ms <= 500
            assert time.monotonic() - t0 >= 0.4


@pytest.mark.peers
def test_confluent_kafka_admin_is_throttled_over_the_mutation_quota():
    # librdkafka sends CreateTopics v4, CreatePartitions v2 and DeleteTopics v4, all from
    # before KIP-599: as Kafka, its mutations are done and it is throttled, not refused
    pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    with Cluster(config=_MUTATIONS) as c, Admin(bootstrap_servers=c.bootstrap) as admin:
        c.create_topic("t", 1)
        admin.alter_client_quotas({(("client-id", "ck"),): {"controller_mutation_rate": 20}})
        throttled: list[float] = []
        ck_admin = AdminClient({"bootstrap.servers": c.bootstrap, "client.id": "ck",
                                "throttle_cb": lambda e: throttled.append(e.throttle_time)})
        assert ck_admin.create_topics([NewTopic("a", 30, 1)])["a"].result(10) is None
        ck_admin.poll(0.5)
        assert throttled and 0.4 <= max(throttled) <= 0.5
        assert ck_admin.create_partitions([NewPartitions("t", 31)])["t"].result(10) is None
        assert ck_admin.delete_topics(["a"])["a"].result(10) is None
        ck_admin.poll(0.5)
        assert "a" not in c.state.topics and len(c.state.topics["t"].partitions) == 31
        assert max(throttled) >= 1.0           # 30 more mutations each: 1.5 s
