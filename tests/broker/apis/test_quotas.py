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
