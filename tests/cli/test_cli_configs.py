"""``kcodec configs describe|alter`` against kcodec's broker (kafka-configs.sh's options)."""

from __future__ import annotations

import json

import pytest

from kcodec.broker import Cluster
from kcodec.cli import main
from kcodec.cli._client import UsageError
from kcodec.cli.configs import split_configs


@pytest.fixture(scope="module")
def kb():
    with Cluster() as c:
        c.create_topic("events", configs={"retention.ms": "86400000"})
        yield c


def configs(capsys, kb, *argv: str) -> tuple[int, str, str]:
    rc = main(["configs", *argv, "-b", kb.bootstrap, "--timeout", "10"])
    out, err = capsys.readouterr()
    return rc, out, err


def test_describe_the_set_configs_or_all(capsys, kb):
    rc, out, err = configs(capsys, kb, "describe", "--topic", "events")
    assert rc == 0, err
    assert out.splitlines()[0].split() == ["CONFIG", "VALUE", "SOURCE", "READ-ONLY"]
    assert "retention.ms  86400000  DYNAMIC_TOPIC_CONFIG" in out and "segment.ms" not in out
    rc, out, _ = configs(capsys, kb, "describe", "--entity-type", "topics", "--entity-name",
                         "events", "--all", "--json")
    rows = {r["name"]: r for r in map(json.loads, out.splitlines())}
    assert rc == 0 and rows["segment.ms"]["source"] == "DEFAULT_CONFIG" and len(rows) == 33
    rc, out, _ = configs(capsys, kb, "describe", "--broker", "0", "--all", "--synonyms")
    assert rc == 0 and "group.initial.rebalance.delay.ms" in out and "yes" in out


def test_alter_set_append_delete(capsys, kb):
    rc, out, err = configs(capsys, kb, "alter", "--topic", "events", "--add-config",
                           "max.message.bytes=2000,cleanup.policy=[compact,delete]")
    assert (rc, out) == (0, "topic 'events': altered (2 config(s))\n"), err
    rc, out, _ = configs(capsys, kb, "describe", "--topic", "events", "--json")
    got = {r["name"]: r["value"] for r in map(json.loads, out.splitlines())}
    assert got["cleanup.policy"] == "compact,delete" and got["max.message.bytes"] == "2000"
    assert configs(capsys, kb, "alter", "--topic", "events", "--subtract-config",
                   "cleanup.policy=delete", "--delete-config", "max.message.bytes")[0] == 0
    rc, out, _ = configs(capsys, kb, "describe", "--topic", "events", "--json")
    got = {r["name"]: r["value"] for r in map(json.loads, out.splitlines())}
    assert got == {"cleanup.policy": "compact", "retention.ms": "86400000"}
    rc, out, _ = configs(capsys, kb, "alter", "--broker-defaults", "--add-config",
                         "log.retention.ms=7200000")
    assert (rc, out) == (0, "the broker defaults: altered (1 config(s))\n")


def test_refusals_and_usage(capsys, kb):
    rc, out, _ = configs(capsys, kb, "alter", "--topic", "events", "--add-config",
                         "retention.ms=soon")
    assert rc == 1 and "INVALID_CONFIG: Invalid value soon for configuration retention.ms" in out
    rc, out, _ = configs(capsys, kb, "alter", "--broker", "0", "--add-config",
                         "num.partitions=3")
    assert rc == 1 and "Cannot update these configs dynamically" in out
    rc, _, err = configs(capsys, kb, "alter", "--topic", "events")
    assert rc == 2 and "nothing to change" in err
    rc, _, err = configs(capsys, kb, "describe", "--topic", "events", "--group", "g")
    assert rc == 2 and "name one entity" in err
    assert main(["configs"]) == 2


def test_split_configs_as_kafka_configs_sh():
    assert split_configs("a=1,b=[x,y],c=") == [("a", "1"), ("b", "x,y"), ("c", "")]
    with pytest.raises(UsageError):
        split_configs("a=[x,y")
