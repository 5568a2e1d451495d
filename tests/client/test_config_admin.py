"""Admin's config calls (kcodec/client/config_admin.py) against kcodec's broker: describe
with sources and synonyms, AlterConfigs, IncrementalAlterConfigs with append/subtract, a
broker's own resource sent to that broker, and the errors."""

from __future__ import annotations

import asyncio

import pytest

from kcodec.broker import Cluster
from kcodec.client import Admin, KafkaError, NewTopic
from kcodec.client.admin import AlterConfigOp, AsyncAdmin, ConfigResource
from kcodec.protocol import ErrorCode


@pytest.fixture(scope="module")
def kb():
    with Cluster(2) as c:
        yield c


def test_describe_alter_and_incremental(kb):
    with Admin(bootstrap_servers=kb.bootstrap) as admin:
        admin.create_topics([NewTopic("cfg", 1, configs={"retention.ms": "60000"})])
        t = ConfigResource("topic", "cfg")
        got = admin.describe_configs([t])[t]
        assert got["retention.ms"].value == "60000"
        assert got["retention.ms"].source == "DYNAMIC_TOPIC_CONFIG"
        assert got["segment.ms"].is_default and got["cleanup.policy"].type == "LIST"
        assert got["retention.ms"].synonyms[0] == ("retention.ms", "60000",
                                                   "DYNAMIC_TOPIC_CONFIG")
        assert admin.incremental_alter_configs({t: [
            AlterConfigOp("cleanup.policy", "compact", "append"),
            AlterConfigOp("retention.ms", op="delete")]}) == {t: None}
        got = admin.describe_configs([("topic", "cfg")], keys=["cleanup.policy", "retention.ms"])
        assert {k: e.value for k, e in got[t].items()} == {
            "cleanup.policy": "delete,compact", "retention.ms": "604800000"}
        assert admin.alter_configs({t: {"max.message.bytes": "2000"}}) == {t: None}
        got = admin.describe_configs([t], keys=["max.message.bytes", "cleanup.policy"])[t]
        assert got["max.message.bytes"].value == "2000" and got["cleanup.policy"].is_default


def test_errors_are_per_resource(kb):
    with Admin(bootstrap_servers=kb.bootstrap) as admin:
        t = ConfigResource("topic", "missing")
        err = admin.alter_configs({t: {"retention.ms": "1"}})[t]
        assert isinstance(err, KafkaError) and err.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        admin.create_topics(["cfg2"])
        t2 = ConfigResource("topic", "cfg2")
        err = admin.incremental_alter_configs({t2: [AlterConfigOp("retention.ms", "x")]})[t2]
        assert err.code == ErrorCode.INVALID_CONFIG and "Not a number of type LONG" in str(err)
        with pytest.raises(KafkaError) as e:
            admin.describe_configs([t])
        assert e.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(ValueError, match="config resource type"):
        ConfigResource("toppic", "x")
    with pytest.raises(ValueError, match="config operation"):
        AlterConfigOp("a", "b", "add")


def test_broker_resources_and_the_async_twin(kb):
    async def main() -> None:
        async with AsyncAdmin(bootstrap_servers=kb.bootstrap) as admin:
            one = ConfigResource("broker", "1")
            got = await admin.describe_configs([one, ConfigResource("broker", "")])
            assert got[one]["group.initial.rebalance.delay.ms"].read_only
            cluster = ConfigResource("broker", "")
            assert await admin.incremental_alter_configs({cluster: [
                AlterConfigOp("log.retention.ms", "3600000")]}) == {cluster: None}
            got = await admin.describe_configs([cluster])
            assert got[cluster]["log.retention.ms"].source == "DYNAMIC_DEFAULT_BROKER_CONFIG"
            err = (await admin.incremental_alter_configs({one: [
                AlterConfigOp("num.partitions", "3")]}))[one]
            assert err.code == ErrorCode.INVALID_CONFIG
    asyncio.run(main())
