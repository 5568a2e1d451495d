"""The librdkafka conformance harness (tools/conformance): its parsing, its stand-ins for
Kafka's scripts, and (slow, with a librdkafka checkout in $LIBRDKAFKA_SRC) a few of
librdkafka's own tests against kcodec broker."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kcodec.broker import Cluster
from tools.conformance import kafka_scripts
from tools.conformance.run import (
    _TOO_FEW_BROKERS,
    BROKER_ARGS,
    from_logs,
    list_tests,
    parse_summary,
    run,
    table,
)

TEST_C = """
struct test tests[] = {
    {.name = "<MAIN>", .flags = TEST_F_LOCAL},
    _TEST(0000_unittests,
          TEST_F_LOCAL,
          _THRES(.ucpu = 100.0)),
    _TEST(0001_multiobj, 0),
    _TEST(0045_subscribe_update_topic_remove,
          0,
          TEST_BRKVER(0, 9, 0, 0),
          .scenario = "noautocreate"),
    _TEST(8000_idle, TEST_F_MANUAL),
    _TEST(0103_transactions, 0, TEST_BRKVER(0, 11, 0, 0), .scenario = "default,ak23"),
};
"""


def test_list_tests_reads_flags_and_scenarios(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test.c").write_text(TEST_C)
    tests = list_tests(tmp_path)
    assert [(t.name, t.number, t.cluster, t.scenario) for t in tests] == [
        ("0000_unittests", "0000", False, "default"),
        ("0001_multiobj", "0001", True, "default"),
        ("0045_subscribe_update_topic_remove", "0045", True, "noautocreate"),
        ("8000_idle", "8000", False, "default"),
        ("0103_transactions", "0103", True, "default,ak23"),
    ]


def test_parse_summary_strips_colours_and_skips_main():
    out = ("noise\nTEST 2026 (bare, scenario default) SUMMARY\n"
           "#====#\n|\x1b[32m <MAIN>        |     PASSED |   2.001s \x1b[0m|\n"
           "|\x1b[32m 0001_multiobj |     PASSED |   1.058s \x1b[0m|\n"
           "|\x1b[31m 0034_offset_reset |     FAILED |  30.500s \x1b[0m|\n")
    assert parse_summary(out) == {"0001_multiobj": ("PASSED", 1.058),
                                  "0034_offset_reset": ("FAILED", 30.5)}
    aborted = ('\x1b[0m\x1b[31m### Test "0011_produce_batch (sub:629)" failed at x.c:718 ###\n'
               '### Test "<MAIN>" failed at test.c:1946 ###\n'
               "\x1b[32m================= Test 0012_produce_consume PASSED =================\n")
    assert parse_summary(aborted) == {"0011_produce_batch": ("FAILED", 0.0),
                                      "0012_produce_consume": ("PASSED", 0.0)}
    text = table({"classic": {"0001_multiobj": ("PASSED", 1.0, 1)},
                  "consumer": {"0001_multiobj": ("FAILED", 2.0, 3)}})
    assert "| 0001_multiobj | PASSED (1s) | FAILED (2s, 3 nodes) |" in text
    assert "- consumer: 1 failed" in text


def test_from_logs_keeps_the_last_run_of_each_test(tmp_path):
    import os as _os

    row = "|\x1b[32m 0103_transactions |     {} |   3.000s \x1b[0m|\n"
    one = tmp_path / "0103-default-classic-1n.log"
    one.write_text(row.format("FAILED"))
    three = tmp_path / "0103-default-classic-3n.log"
    three.write_text(row.format("PASSED"))
    _os.utime(one, (1, 1))
    (tmp_path / "0103-default-classic-1n.broker.log").write_text("not a result")
    assert from_logs(tmp_path) == {"classic": {"0103_transactions": ("PASSED", 3.0, 3)}}


def test_too_few_brokers_is_recognised():
    # what kcodec's broker and Kafka answer for a replication factor above the node count
    assert _TOO_FEW_BROKERS.search("result error: replication factor 3: this cluster has 1 node(s)")
    assert _TOO_FEW_BROKERS.search("Broker: Invalid replication factor (INVALID_REPLICATION_FACTOR)")
    assert not _TOO_FEW_BROKERS.search("Test 0001_multiobj PASSED")


def test_kafka_topics_and_acls_stand_ins(capsys):
    with Cluster(1, authorizer=True, allow_everyone_if_no_acl_found=True,
                 super_users=["User:admin"]) as c:
        b = c.bootstrap
        topics = kafka_scripts.main
        assert topics(["kafka-topics", "--bootstrap-server", b, "--create", "--topic", "ts",
                       "--partitions", "2", "--replication-factor", "1",
                       "--config", "cleanup.policy=compact"]) == 0
        assert len(c.state.topics["ts"].partitions) == 2
        assert topics(["kafka-topics", "--bootstrap-server", b, "--alter", "--topic", "ts",
                       "--partitions", "4"]) == 0
        assert len(c.state.topics["ts"].partitions) == 4
        assert topics(["kafka-topics", "--bootstrap-server", b, "--create", "--topic", "ts"]) == 1
        assert "Error for topic ts" in capsys.readouterr().err
        assert kafka_scripts.main(["kafka-acls", "--bootstrap-server", b, "--add",
                                   "--deny-principal", "User:*", "--operation", "Read",
                                   "--operation", "DescribeConfigs", "--deny-host", "*",
                                   "--topic", "ts"]) == 0
        acls = c.authorizer.acls()
        assert sorted(int(a.operation) for a in acls) == [3, 10]   # READ, DESCRIBE_CONFIGS
        assert kafka_scripts.main(["kafka-acls", "--bootstrap-server", b, "--remove", "--force",
                                   "--deny-principal", "User:*", "--operation", "Read",
                                   "--operation", "DescribeConfigs", "--deny-host", "*",
                                   "--topic", "ts"]) == 0
        assert c.authorizer.acls() == []
        assert topics(["kafka-topics", "--bootstrap-server", b, "--delete", "--topic", "ts"]) == 0
        assert "ts" not in c.state.topics
    with pytest.raises(SystemExit):   # an option the stand-in does not know fails loudly
        kafka_scripts.main(["kafka-topics", "--bootstrap-server", "x:1", "--describe"])


def test_the_broker_has_a_rack_per_node_and_the_rack_aware_selector(tmp_path):
    # as librdkafka's clusters: its 0101 (fetch from follower) needs 3 distinct racks
    from kcodec.client import Admin
    from tools.conformance.run import Broker

    broker = Broker(3, log=tmp_path / "broker.log")
    try:
        with Admin(bootstrap_servers=broker.bootstrap) as a:
            racks = {b.node_id: b.rack for b in a.describe_cluster().brokers}
    finally:
        broker.stop()
    assert racks == {0: "RACK0", 1: "RACK1", 2: "RACK2"}
    assert "replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector" \
        in BROKER_ARGS


def test_the_sasl_tests_get_a_sasl_broker_that_admin_logs_in_to(tmp_path):
    # librdkafka's 0135 and 0142 skip without a SASL listener; 0142 reads the session
    # lifetime from DescribeConfigs and skips at 0
    from kcodec.client import Admin
    from tools.conformance.run import SASL_TESTS, SASL_USERS, Broker

    assert {"0135", "0142"} <= SASL_TESTS
    users = tmp_path / "users"
    users.write_text("".join(f"{u}:{pw}\n" for u, pw in SASL_USERS.items()))
    broker = Broker(1, log=tmp_path / "broker.log", sasl_users=users)
    try:
        with Admin(bootstrap_servers=broker.bootstrap, security_protocol="SASL_PLAINTEXT",
                   sasl_mechanism="SCRAM-SHA-256", sasl_username="admin",
                   sasl_password=SASL_USERS["admin"]) as a:
            got = a.describe_configs([("broker", "0")])
    finally:
        broker.stop()
    (entries,) = got.values()
    assert entries["connections.max.reauth.ms"].value == "10000"


SMALL = "0001,0019,0034,0119"   # fast ones, among them the Fetch-error and ACL cases


@pytest.mark.slow
def test_librdkafka_suite_part(tmp_path):
    src = os.environ.get("LIBRDKAFKA_SRC")
    if not src or not (Path(src) / "tests" / "test.c").exists():
        pytest.skip("no librdkafka checkout: set LIBRDKAFKA_SRC to run its tests")
    results = run(Path(src), ["classic", "consumer"], set(SMALL.split(",")), 600.0, tmp_path,
                  set())
    bad = {(p, n): st for p, r in results.items() for n, st in r.items() if st[0] != "PASSED"}
    assert results["classic"] and not bad, table(results)
