"""Spark's kafka.* security options on the kcodec source and sink: the mapping to kcodec's
client settings, and end to end in a real Spark session against kcodec's broker with a
SASL_SSL listener (trustme certificates; PLAIN, SCRAM and OAUTHBEARER)."""

from __future__ import annotations

import pickle
import time
import uuid

import pytest

pytest.importorskip("pyspark", reason="kcodec.spark needs pyspark (the spark/test extras)")
pytest.importorskip("pyarrow")
pytest.importorskip("trustme")

from kcodec.spark.options import parse_sink, parse_source  # noqa: E402
from kcodec.spark.security import TokenFile, materialize, parse_jaas  # noqa: E402

BS = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}
PLAIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
         'username="alice" password="alice-secret";')
SCRAM = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
         'username="alice" password="alice-secret";')
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"


def _src(**kw: str):
    return parse_source({**BS, **kw})


def test_jaas_entries() -> None:
    assert parse_jaas(PLAIN) == ("org.apache.kafka.common.security.plain.PlainLoginModule",
                                 {"username": "alice", "password": "alice-secret"})
    mod, opts = parse_jaas('x.Y required\n  username="a \\"b\\"" password=bare ;')
    assert mod == "x.Y" and opts == {"username": 'a "b"', "password": "bare"}
    for bad in ("", "x.Y", 'x.Y required username="a"', 'x.Y maybe a="b";'):
        with pytest.raises(ValueError, match="not a JAAS entry"):
            parse_jaas(bad)


def test_security_options_map_to_the_client(tmp_path) -> None:
    o = _src(**{"kafka.security.protocol": "sasl_ssl", "kafka.sasl.mechanism": "SCRAM-SHA-512",
                "kafka.sasl.jaas.config": SCRAM, "kafka.ssl.truststore.location": "/ca.pem",
                "kafka.ssl.truststore.type": "PEM",
                "kafka.ssl.endpoint.identification.algorithm": ""})
    assert o.client == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                        "sasl_username": "alice", "sasl_password": "alice-secret",
                        "ssl_cafile": "/ca.pem", "ssl_endpoint_identification_algorithm": ""}
    s = parse_sink({"kafka.bootstrap.servers": "h:1", "topic": "t",
                    "kafka.security.protocol": "SSL", "kafka.ssl.keystore.location": "/k.pem",
                    "kafka.ssl.key.password": "pw"})
    assert s.client == {"security_protocol": "SSL", "ssl_certfile": "/k.pem",
                        "ssl_password": "pw", "acks": "all", "batch_size": 512 * 1024}
    # PEM given as text becomes a private file on the machine that connects
    o = _src(**{"kafka.security.protocol": "SSL",
                "kafka.ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----\nAAAA\n"
                                                     "-----END CERTIFICATE-----"})
    kw = materialize(o.client)
    assert "ssl_cafile_pem" not in kw
    with open(kw["ssl_cafile"]) as f:
        assert f.read().startswith("-----BEGIN CERTIFICATE-----\nAAAA")
    assert materialize(o.client)["ssl_cafile"] == kw["ssl_cafile"]
    token = tmp_path / "token"
    token.write_text("tok-1\n")
    o = _src(**{"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "OAUTHBEARER",
                "kafka.sasl.jaas.config": OAUTH,
                "kafka.sasl.oauthbearer.token.endpoint.url": f"file://{token}"})
    provider = pickle.loads(pickle.dumps(o.client["sasl_oauth_token_provider"]))
    assert provider == TokenFile(str(token)) and provider() == "tok-1"
    token.write_text("tok-2\n")
    assert provider() == "tok-2"


@pytest.mark.parametrize("opts, message", [
    ({"kafka.security.protocol": "TLS"}, "must be PLAINTEXT, SSL"),
    ({"kafka.sasl.mechanism": "PLAIN"}, "protocol is PLAINTEXT"),
    ({"kafka.ssl.truststore.location": "/x.pem"}, "protocol is PLAINTEXT"),
    ({"kafka.security.protocol": "SASL_SSL"}, "GSSAPI"),
    ({"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN"},
     "sasl.jaas.config is required"),
    ({"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-256",
      "kafka.sasl.jaas.config": PLAIN}, "does not do kafka.sasl.mechanism SCRAM-SHA-256"),
    ({"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
      "kafka.sasl.jaas.config": "com.example.Login required;"}, "not supported"),
    ({"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
      "kafka.sasl.jaas.config": PLAIN.replace(' password="alice-secret"', "")},
     "needs username and password"),
    ({"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "OAUTHBEARER",
      "kafka.sasl.jaas.config": OAUTH}, "file: URL"),
    ({"kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": "/t.jks"},
     "cannot be read by kcodec"),
    ({"kafka.security.protocol": "SSL", "kafka.ssl.truststore.type": "PKCS12",
      "kafka.ssl.truststore.location": "/t"}, "keytool"),
    ({"kafka.security.protocol": "SSL", "kafka.ssl.truststore.password": "x"},
     "JKS/PKCS12"),
    ({"kafka.security.protocol": "SSL", "kafka.ssl.keystore.key": "x"}, "go together"),
    ({"kafka.security.protocol": "SSL", "kafka.ssl.endpoint.identification.algorithm": "x"},
     "https or empty"),
])
def test_bad_security_options(opts: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as e:
        _src(**opts)
    assert "alice-secret" not in str(e.value)


def test_a_broken_jaas_entry_does_not_show_the_password() -> None:
    with pytest.raises(ValueError) as e:
        _src(**{"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
                "kafka.sasl.jaas.config": PLAIN.rstrip(";") + ' extra="'})
    assert "alice-secret" not in str(e.value) and "value not shown" in str(e.value)


# ---------------------------------------------------------------------------------------------
# end to end: Spark against kcodec's broker with a SASL_SSL listener


@pytest.fixture(scope="module")
def secure():
    from kcodec.broker import Cluster
    from kcodec.broker.security import (
        ListenerSecurity,
        OAuthBearerServer,
        PlainServer,
        ScramServer,
        TokenInfo,
        make_scram_credential,
        server_context,
    )
    from tests.support.security_util import Certs

    def validator(token: str, ext: dict) -> TokenInfo:
        kind, _, exp = token.partition(":")
        if kind != "valid":
            raise ValueError("token signature is invalid")
        return TokenInfo("oauth-user", expires_at=float(exp))

    users = {"alice": "alice-secret"}
    scram = {u: make_scram_credential("SCRAM-SHA-512", p) for u, p in users.items()}
    certs = Certs()
    sec = ListenerSecurity(ssl_context=server_context(certs.certfile, certs.keyfile),
                           sasl={"PLAIN": lambda: PlainServer(users),
                                 "SCRAM-SHA-512": lambda: ScramServer("SCRAM-SHA-512", scram),
                                 "OAUTHBEARER": lambda: OAuthBearerServer(validator)})
    try:
        with Cluster(1, host="localhost", num_partitions=2, security=sec) as b:
            yield b.bootstrap, certs
    finally:
        certs.cleanup()


@pytest.fixture(scope="module")
def spark():
    from tests.support.spark_support import make_session

    return make_session()     # the run's shared session (stopped by the run's first user)


def _opts(bootstrap: str, certs, mech: str, jaas: str, **extra: str) -> dict:
    return {"kafka.bootstrap.servers": bootstrap, "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": mech, "kafka.sasl.jaas.config": jaas,
            "kafka.ssl.truststore.location": certs.cafile, "kafka.ssl.truststore.type": "PEM",
            "kafka.request.timeout.ms": "10000", "kafka.default.api.timeout.ms": "15000",
            **extra}


@pytest.mark.slow
@pytest.mark.peers
def test_spark_source_and_sink_over_sasl_ssl(spark, secure, tmp_path) -> None:
    """The sink writes with SCRAM-SHA-512, the batch source reads with PLAIN (CAs given as
    PEM text) and with OAUTHBEARER from a token file; confluent-kafka, authenticating on
    its own, reads the same records."""
    import confluent_kafka

    bootstrap, certs = secure
    topic = f"sec-{uuid.uuid4().hex[:8]}"
    rows = [(f"k{i}", f"v{i}", i % 2) for i in range(200)]
    df = spark.createDataFrame(rows, "key string, value string, partition int")
    w = df.write.format("kcodec").option("topic", topic).mode("append")
    for k, v in _opts(bootstrap, certs, "SCRAM-SHA-512", SCRAM).items():
        w = w.option(k, v)
    w.save()

    with open(certs.cafile) as f:
        ca_text = f.read()
    plain = _opts(bootstrap, certs, "PLAIN", PLAIN)
    del plain["kafka.ssl.truststore.location"]
    plain["kafka.ssl.truststore.certificates"] = ca_text
    token = tmp_path / "token"
    token.write_text(f"valid:{time.time() + 600}\n")
    oauth = _opts(bootstrap, certs, "OAUTHBEARER", OAUTH, **{
        "kafka.sasl.oauthbearer.token.endpoint.url": f"file://{token}"})
    want = sorted((p, f"k{i}", f"v{i}") for i, (_, _, p) in enumerate(rows))
    for opts in (plain, oauth):
        r = spark.read.format("kcodec").option("subscribe", topic)
        for k, v in opts.items():
            r = r.option(k, v)
        got = r.load().selectExpr("partition", "CAST(key AS STRING) k",
                                  "CAST(value AS STRING) v").collect()
        assert sorted((x.partition, x.k, x.v) for x in got) == want

    c = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret",
        "ssl.ca.location": certs.cafile, "group.id": f"g-{topic}",
        "enable.auto.commit": False})
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in (0, 1)])
        seen = []
        deadline = time.monotonic() + 30
        while len(seen) < 200 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                seen.append((m.partition(), m.key().decode(), m.value().decode()))
        assert sorted(seen) == want
    finally:
        c.close()


@pytest.mark.slow
def test_spark_wrong_password_fails_the_query_clearly(spark, secure) -> None:
    bootstrap, certs = secure
    opts = _opts(bootstrap, certs, "PLAIN", PLAIN.replace("alice-secret", "wrong-pass"))
    r = spark.read.format("kcodec").option("subscribe", "anything")
    for k, v in opts.items():
        r = r.option(k, v)
    with pytest.raises(Exception) as e:
        r.load().count()
    text = str(e.value)
    assert "uthentication" in text and "wrong-pass" not in text, text[-2000:]
    # no CA given: the broker's certificate is not trusted, and the error says so
    opts = _opts(bootstrap, certs, "PLAIN", PLAIN)
    del opts["kafka.ssl.truststore.location"], opts["kafka.ssl.truststore.type"]
    r = spark.read.format("kcodec").option("subscribe", "anything")
    for k, v in opts.items():
        r = r.option(k, v)
    with pytest.raises(Exception, match="certificate"):
        r.load().count()
