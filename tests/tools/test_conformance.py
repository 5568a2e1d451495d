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


def test_the_ssl_tests_get_a_certificate_set_and_a_broker_that_requires_client_certs(tmp_path):
    # librdkafka's 0097 skips without the SSL_* files its SSL clusters provide; its broker
    # serves a chain through an intermediate CA and requires client certificates
    import socket
    import ssl
    import struct

    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import load_der_private_key, pkcs12

    from kcodec.client import Admin
    from tools.conformance import ssl_certs
    from tools.conformance.run import SSL_TESTS, Broker

    assert "0097" in SSL_TESTS
    certs = ssl_certs.make(tmp_path / "ssl")
    env = certs.env()
    assert env["SSL_client_auth"] == "required" and "SSL_intermediate_pub_pem" not in env
    for name, value in env.items():
        if name not in ("SSL_password", "SSL_client_auth"):
            assert Path(value).stat().st_size > 0, name
    # the forms the test loads agree: PEM, DER and PKCS#12 hold one client key and certificate
    pem = x509.load_pem_x509_certificate(Path(env["SSL_pub_pem"]).read_bytes())
    assert x509.load_der_x509_certificate(Path(env["SSL_pub_der"]).read_bytes()) == pem
    key, cert, extra = pkcs12.load_key_and_certificates(Path(env["SSL_pkcs"]).read_bytes(),
                                                        ssl_certs.PASSWORD.encode())
    root = x509.load_pem_x509_certificate(Path(env["SSL_ca_pem"]).read_bytes())
    assert cert == pem and extra == [root] and key is not None
    der_key = load_der_private_key(Path(env["SSL_priv_der"]).read_bytes(), None)
    assert der_key.public_key().public_numbers() == key.public_key().public_numbers()
    assert Path(env["SSL_all_cas_pem"]).read_bytes().count(b"BEGIN CERTIFICATE") == 2
    chain = x509.load_pem_x509_certificates(certs.broker_certfile.read_bytes())
    assert [c.issuer for c in chain] == [chain[1].subject, root.subject]

    broker = Broker(1, log=tmp_path / "broker.log", certs=certs)
    try:
        conf = dict(line.split("=", 1) for line in certs.client_conf().splitlines())
        with Admin(bootstrap_servers=broker.bootstrap, security_protocol="SSL",
                   ssl_cafile=conf["ssl.ca.location"],
                   ssl_certfile=conf["ssl.certificate.location"],
                   ssl_keyfile=conf["ssl.key.location"],
                   ssl_password=conf["ssl.key.password"]) as a:
            assert [b.node_id for b in a.describe_cluster().brokers] == [0]
        # without a client certificate an ApiVersions v0 request gets no answer: the broker
        # refuses the handshake (under TLS 1.3 the client learns it at its first read)
        host, port = broker.bootstrap.rsplit(":", 1)
        ctx = ssl.create_default_context(cafile=str(certs.cafile))
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            with pytest.raises((ssl.SSLError, ConnectionError)):
                with ctx.wrap_socket(raw, server_hostname=host) as tls:
                    tls.sendall(struct.pack(">ihhih", 10, 18, 0, 1, -1))
                    if not tls.recv(4):
                        raise ConnectionResetError("closed without an answer")
    finally:
        broker.stop()


SMALL = "0001,0019,0034,0119"   # fast ones, among them the Fetch-error and ACL cases


def _fetch_token(url: str, form: str, auth: tuple[str, str] | None = None) -> str:
    import base64
    import json
    import urllib.request

    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if auth is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(auth).encode()).decode()
    req = urllib.request.Request(url, data=form.encode(), headers=headers)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return str(json.loads(resp.read())["access_token"])


def test_the_oidc_tests_get_a_mock_provider_and_a_broker_checking_its_tokens(tmp_path):
    # librdkafka's 0126 skips without VALID/EXPIRED_TOKEN/INVALID_OIDC_URL and a broker
    # whose OAUTHBEARER listener checks those tokens against the provider's JWKS
    import json
    import time
    import urllib.error
    import urllib.request

    from kcodec.client import Admin
    from kcodec.client.errors import SaslAuthenticationError
    from tools.conformance import oidc
    from tools.conformance.run import OIDC_TESTS, Broker

    assert "0126" in OIDC_TESTS
    provider = oidc.Provider(tmp_path / "oidc")
    try:
        env = provider.env()
        assert "sasl.oauthbearer.method=oidc" in provider.client_conf()
        creds = (oidc.CLIENT_ID, oidc.CLIENT_SECRET)
        grant = "grant_type=client_credentials"
        with urllib.request.urlopen(provider.jwks_url, timeout=10) as resp:
            assert [k["kid"] for k in json.loads(resp.read())["keys"]] == [oidc.KID]
        with pytest.raises(urllib.error.HTTPError) as refused:
            _fetch_token(env["VALID_OIDC_URL"], grant, ("someone", "wrong"))
        assert refused.value.code == 401
        with pytest.raises(urllib.error.HTTPError):
            _fetch_token(env["VALID_OIDC_URL"], grant + "&scope=invalid_scope", creds)
        # the jwt-bearer grant: an assertion signed by the client key in the env's file
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        key = load_pem_private_key(
            Path(env["OAUTHBEARER_CLIENT_PRIVATE_KEY"]).read_bytes(), None)
        assertion = oidc.sign_jwt({"sub": "testuser", "exp": int(time.time()) + 60}, key)
        bearer = _fetch_token(env["VALID_OIDC_URL"],
                              f"grant_type={oidc.JWT_BEARER}&assertion={assertion}")
        assert bearer.count(".") == 2

        broker = Broker(1, log=tmp_path / "broker.log", oidc=provider)
        try:
            def login(url: str) -> Admin:
                return Admin(bootstrap_servers=broker.bootstrap,
                             security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                             sasl_oauth_token_provider=lambda: _fetch_token(url, grant, creds),
                             request_timeout_ms=10000)

            with login(env["VALID_OIDC_URL"]) as a:
                assert a.describe_cluster().brokers
            for kind in ("EXPIRED_TOKEN_OIDC_URL", "INVALID_OIDC_URL"):
                with pytest.raises(SaslAuthenticationError), login(env[kind]) as a:
                    a.describe_cluster()
        finally:
            broker.stop()
    finally:
        provider.close()
    assert "POST /expired -> 200" in provider.requests


@pytest.mark.slow
def test_librdkafka_suite_part(tmp_path):
    src = os.environ.get("LIBRDKAFKA_SRC")
    if not src or not (Path(src) / "tests" / "test.c").exists():
        pytest.skip("no librdkafka checkout: set LIBRDKAFKA_SRC to run its tests")
    results = run(Path(src), ["classic", "consumer"], set(SMALL.split(",")), 600.0, tmp_path,
                  set())
    bad = {(p, n): st for p, r in results.items() for n, st in r.items() if st[0] != "PASSED"}
    assert results["classic"] and not bad, table(results)
