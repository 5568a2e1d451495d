"""kcodec's client over TLS (stunnel in front of Tansu, certificates from trustme) and SASL
(PLAIN, SCRAM-SHA-256/512, OAUTHBEARER) through a test-only SASL front layer made of
kcodec's broker-side building blocks; failures are fast and name their cause."""

from __future__ import annotations

import time
import uuid

import pytest

from kcodec.broker.security import (
    OAuthBearerServer,
    PlainServer,
    ScramServer,
    TokenInfo,
    make_scram_credential,
    server_context,
)
from kcodec.client import Admin, Consumer, Producer
from kcodec.client.errors import (
    BrokerNotAvailableError,
    KafkaTimeoutError,
    SaslAuthenticationError,
    SslAuthenticationError,
)
from tests.support.security_util import (
    NO_STUNNEL,
    Certs,
    SaslFront,
    Stunnel,
    TansuAdvertising,
    free_port,
    stunnel_binary,
)

pytestmark = pytest.mark.broker

USERS = {"alice": "alice-secret"}
FAST = dict(api_timeout_ms=15000, request_timeout_ms=10000)


@pytest.fixture(scope="module")
def certs():
    c = Certs()
    yield c
    c.cleanup()


@pytest.fixture(scope="module")
def tls_broker(certs):
    """Tansu behind stunnel: only TLS reaches it from the advertised address."""
    if stunnel_binary() is None:
        pytest.skip(NO_STUNNEL)
    for attempt in range(3):
        port = free_port()
        with TansuAdvertising(port) as tansu:
            try:
                st = Stunnel(port, tansu.port, certs).start()
            except RuntimeError:
                if attempt == 2:    # another process took the port each time: say so
                    raise
                continue
            try:
                yield f"localhost:{port}"
            finally:
                st.stop()
            return


def _mechanisms():
    creds = {m: {u: make_scram_credential(m, p) for u, p in USERS.items()}
             for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}
    now = time.time

    def validator(token, ext):
        kind, _, exp = token.partition(":")
        if kind != "valid":
            raise ValueError("token signature is invalid")
        return TokenInfo("oauth-user", expires_at=float(exp))
    return {"PLAIN": lambda: PlainServer(USERS),
            "SCRAM-SHA-256": lambda: ScramServer("SCRAM-SHA-256", creds["SCRAM-SHA-256"]),
            "SCRAM-SHA-512": lambda: ScramServer("SCRAM-SHA-512", creds["SCRAM-SHA-512"]),
            "OAUTHBEARER": lambda: OAuthBearerServer(validator, clock=now)}


@pytest.fixture(scope="module")
def sasl_broker(certs):
    """Tansu behind the SASL front layer; one front in plaintext, one over TLS."""
    port, tls_port = free_port(), free_port()
    with TansuAdvertising(port) as tansu:
        # the broker advertises the plaintext front; the TLS front is used as bootstrap
        # only, with clients reconnecting through the plaintext one (fine for the proof
        # that the SASL_SSL handshake works end to end)
        front = SaslFront(port, tansu.port, _mechanisms(), connections_max_reauth_ms=1500).start()
        tls_front = SaslFront(tls_port, tansu.port, _mechanisms(),
                              ssl_context=server_context(certs.certfile, certs.keyfile)).start()
        try:
            yield {"plain": f"localhost:{port}", "tls": f"localhost:{tls_port}",
                   "front": front, "tls_front": tls_front, "tansu": tansu.port}
        finally:
            front.stop()
            tls_front.stop()


def _roundtrip(bootstrap: str, **sec) -> None:
    topic = f"sec-{uuid.uuid4().hex[:10]}"
    with Admin(bootstrap_servers=bootstrap, **FAST, **sec) as admin:
        admin.create_topics([topic], num_partitions=1)
    with Producer(bootstrap_servers=bootstrap, **FAST, **sec) as p:
        for i in range(20):
            p.send(topic, f"v{i}".encode(), key=b"k")
        p.flush(15)
    c = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **FAST, **sec)
    try:
        c.assign([(topic, 0)])
        got = []
        deadline = time.monotonic() + 15
        while len(got) < 20 and time.monotonic() < deadline:
            for recs in c.poll(1.0).values():
                got += [r.value for r in recs]
        assert got == [f"v{i}".encode() for i in range(20)]
    finally:
        c.close()


# ------------------------------------------------------------------------------ TLS
def test_tls_produce_consume_through_stunnel(tls_broker, certs):
    _roundtrip(tls_broker, security_protocol="SSL", ssl_cafile=certs.cafile)


def test_tls_with_a_given_ssl_context(tls_broker, certs):
    import ssl

    ctx = ssl.create_default_context(cafile=certs.cafile)
    with Admin(bootstrap_servers=tls_broker, security_protocol="SSL", ssl_context=ctx,
               **FAST) as admin:
        assert admin.list_topics() is not None


def test_tls_untrusted_certificate_fails_fast(tls_broker):
    t = time.monotonic()
    with pytest.raises(SslAuthenticationError, match="not trusted"):
        Producer(bootstrap_servers=tls_broker, security_protocol="SSL", **FAST)
    assert time.monotonic() - t < 5


def test_tls_wrong_hostname_fails_fast(tls_broker, certs):
    import trustme

    other = Certs(names=("kafka.example.com",))
    try:
        st = Stunnel(free_port(), int(tls_broker.rsplit(":", 1)[1]), other)
        # a terminator whose certificate names another host (trusted CA)
        st.certs.cafile = other.cafile
        st.start()
        try:
            t = time.monotonic()
            with pytest.raises(SslAuthenticationError, match="does not match host name"):
                Admin(bootstrap_servers=f"localhost:{st.port}", security_protocol="SSL",
                      ssl_cafile=other.cafile, **FAST).list_topics()
            assert time.monotonic() - t < 5
            # with the host name check off (Java: ssl.endpoint.identification.algorithm=""),
            # the same connection is accepted
            Admin(bootstrap_servers=f"localhost:{st.port}", security_protocol="SSL",
                  ssl_cafile=other.cafile, ssl_endpoint_identification_algorithm="",
                  **FAST).close()
        finally:
            st.stop()
    finally:
        other.cleanup()
    assert trustme   # the certificates came from trustme


# ------------------------------------------------------------------------------ SASL
@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_plaintext_produce_consume(sasl_broker, mech):
    _roundtrip(sasl_broker["plain"], security_protocol="SASL_PLAINTEXT", sasl_mechanism=mech,
               sasl_username="alice", sasl_password="alice-secret")
    assert ("auth", "alice") in sasl_broker["front"].events


def test_sasl_oauthbearer_produce_consume(sasl_broker):
    calls = []

    def provider():
        calls.append(1)
        return (f"valid:{time.time() + 600}", time.time() + 600)
    _roundtrip(sasl_broker["plain"], security_protocol="SASL_PLAINTEXT",
               sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=provider)
    assert ("auth", "oauth-user") in sasl_broker["front"].events
    assert len(calls) == 3      # one token per client (admin, producer, consumer), not per connection


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-512"])
def test_sasl_ssl_handshake_and_metadata(sasl_broker, certs, mech):
    with Admin(bootstrap_servers=sasl_broker["tls"], security_protocol="SASL_SSL",
               ssl_cafile=certs.cafile, sasl_mechanism=mech, sasl_username="alice",
               sasl_password="alice-secret", **FAST) as admin:
        assert admin.list_topics() is not None
    assert ("auth", "alice") in sasl_broker["tls_front"].events


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_wrong_password_fails_fast_without_leaking_it(sasl_broker, mech):
    t = time.monotonic()
    with pytest.raises(SaslAuthenticationError) as ei:
        Producer(bootstrap_servers=sasl_broker["plain"], security_protocol="SASL_PLAINTEXT",
                 sasl_mechanism=mech, sasl_username="alice", sasl_password="not-it-42", **FAST)
    assert time.monotonic() - t < 5
    text = str(ei.value)
    assert "alice" in text and mech in text and "not-it-42" not in text


def test_sasl_expired_token_fails_fast(sasl_broker):
    with pytest.raises(SaslAuthenticationError, match="expired"):
        Producer(bootstrap_servers=sasl_broker["plain"], security_protocol="SASL_PLAINTEXT",
                 sasl_mechanism="OAUTHBEARER",
                 sasl_oauth_token_provider=lambda: ("valid:1", time.time() + 60), **FAST)
    with pytest.raises(SaslAuthenticationError, match="the token is not valid"):
        Producer(bootstrap_servers=sasl_broker["plain"], security_protocol="SASL_PLAINTEXT",
                 sasl_mechanism="OAUTHBEARER",
                 sasl_oauth_token_provider=lambda: "forged", **FAST)


def test_sasl_unenabled_mechanism_and_plaintext_client_refused(sasl_broker):
    front = SaslFront(free_port(), sasl_broker["tansu"],
                      {"PLAIN": lambda: PlainServer(USERS)}).start()
    try:
        with pytest.raises(SaslAuthenticationError, match="offers: PLAIN"):
            Admin(bootstrap_servers=f"localhost:{front.port}", security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism="SCRAM-SHA-256", sasl_username="alice",
                  sasl_password="alice-secret", **FAST).list_topics()
    finally:
        front.stop()
    # a client without SASL is cut off at its first real request
    with pytest.raises((BrokerNotAvailableError, KafkaTimeoutError)):
        Admin(bootstrap_servers=sasl_broker["plain"], api_timeout_ms=2000,
              request_timeout_ms=1000).list_topics()
    assert any(e[0] == "refused" for e in sasl_broker["front"].events)


@pytest.mark.slow   # the same on kcodec's broker runs by default (tests/broker/security/test_security.py)
def test_sasl_reauthenticates_when_the_session_ends(sasl_broker):
    """KIP-368: the front gives 1.5 s sessions; a client working for longer re-authenticates
    on the same connections instead of being cut off."""
    front = sasl_broker["front"]
    before = sum(1 for e in front.events if e[0] == "reauth")
    refused = sum(1 for e in front.events if e[0] == "refused")
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    with Producer(bootstrap_servers=sasl_broker["plain"], security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism="SCRAM-SHA-256", sasl_username="alice",
                  sasl_password="alice-secret", **FAST) as p:
        deadline = time.monotonic() + 4
        n = 0
        while time.monotonic() < deadline:
            p.send(topic, b"x").result(10)
            n += 1
            time.sleep(0.2)
    assert n > 5
    assert sum(1 for e in front.events if e[0] == "reauth") > before
    assert sum(1 for e in front.events if e[0] == "refused") == refused


def test_secrets_never_in_reprs_or_config_errors():
    from kcodec.client.config import ProducerConfig

    cfg = ProducerConfig(bootstrap_servers="localhost:1", security_protocol="SASL_SSL",
                         sasl_mechanism="SCRAM-SHA-256", sasl_username="u",
                         sasl_password="pw-123-secret", ssl_password="key-pass-999")
    assert "pw-123-secret" not in repr(cfg) and "key-pass-999" not in repr(cfg)
    with pytest.raises(ValueError) as ei:
        ProducerConfig(bootstrap_servers="localhost:1", security_protocol="SASL_PLAINTEXT",
                       sasl_mechanism="PLAIN", sasl_username="u", sasl_password=12345)
    assert "12345" not in str(ei.value)
    for bad in (dict(security_protocol="TLS"), dict(sasl_mechanism="GSSAPI"),
                dict(security_protocol="SASL_PLAINTEXT"),
                dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER")):
        with pytest.raises(ValueError):
            ProducerConfig(bootstrap_servers="localhost:1", **bad)


# ------------------------------------------------------------------------------ CLI
def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    from kcodec.cli import main

    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_over_tls_and_sasl(tls_broker, sasl_broker, certs, capsys, monkeypatch, tmp_path):
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    rc, out, err = _cli(capsys, "topics", "create", "-b", tls_broker, "--timeout", "15",
                        "--security-protocol", "SSL", "--ssl-cafile", certs.cafile, topic)
    assert rc == 0, err
    rc, out, err = _cli(capsys, "topics", "list", "-b", tls_broker, "--timeout", "15",
                        "--security-protocol", "ssl", "--ssl-cafile", certs.cafile)
    assert rc == 0 and topic in out, err
    monkeypatch.setenv("KCODEC_SASL_PASSWORD", "alice-secret")
    rc, out, err = _cli(capsys, "topics", "list", "-b", sasl_broker["plain"], "--timeout", "15",
                        "--security-protocol", "SASL_PLAINTEXT",
                        "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "alice")
    assert rc == 0, err
    pw = tmp_path / "pw"
    pw.write_text("wrong-one\n")
    rc, out, err = _cli(capsys, "topics", "list", "-b", sasl_broker["plain"], "--timeout", "15",
                        "--security-protocol", "SASL_PLAINTEXT", "--sasl-username", "alice",
                        "--sasl-password-file", str(pw))
    assert rc == 1 and "SASL PLAIN authentication as 'alice'" in err and "wrong-one" not in err
    tok = tmp_path / "token"
    tok.write_text(f"valid:{time.time() + 600}\n")
    rc, out, err = _cli(capsys, "topics", "list", "-b", sasl_broker["plain"], "--timeout", "15",
                        "--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "OAUTHBEARER",
                        "--sasl-oauth-token-file", str(tok))
    assert rc == 0, err
    monkeypatch.delenv("KCODEC_SASL_PASSWORD")
    rc, out, err = _cli(capsys, "topics", "list", "-b", sasl_broker["plain"],
                        "--security-protocol", "SASL_PLAINTEXT", "--sasl-username", "alice")
    assert rc == 2 and "needs --sasl-username and a password" in err


# ------------------------------------------------- independent clients against the blocks
@pytest.mark.peers
@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("tls", [False, True])
def test_confluent_kafka_authenticates_against_the_broker_blocks(sasl_broker, certs, mech, tls):
    """librdkafka's SASL client against kcodec.broker.security (through the front layer)."""
    import confluent_kafka
    import confluent_kafka.admin

    conf = {"bootstrap.servers": sasl_broker["tls" if tls else "plain"],
            "security.protocol": "sasl_ssl" if tls else "sasl_plaintext",
            "sasl.mechanism": mech, "sasl.username": "alice", "sasl.password": "alice-secret"}
    if tls:
        conf["ssl.ca.location"] = certs.cafile
    admin = confluent_kafka.admin.AdminClient(conf)
    md = admin.list_topics(timeout=15)
    assert md.brokers
    if mech == "SCRAM-SHA-512" and not tls:    # once: librdkafka retries until its timeout
        bad = confluent_kafka.admin.AdminClient({**conf, "sasl.password": "nope"})
        with pytest.raises(confluent_kafka.KafkaException):
            bad.list_topics(timeout=2)


@pytest.mark.peers
@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_kafka_python_authenticates_and_produces_consumes(sasl_broker, mech):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Tokens(AbstractTokenProvider):
        def token(self):
            return f"valid:{time.time() + 600}"

    sec = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mech}
    if mech == "OAUTHBEARER":
        sec["sasl_oauth_token_provider"] = Tokens()
    else:
        sec.update(sasl_plain_username="alice", sasl_plain_password="alice-secret")
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers=sasl_broker["plain"], security_protocol="SASL_PLAINTEXT",
               sasl_username="alice", sasl_password="alice-secret", **FAST) as admin:
        admin.create_topics([topic], num_partitions=1)
    p = KafkaProducer(bootstrap_servers=sasl_broker["plain"], **sec)
    for i in range(5):
        p.send(topic, f"k{i}".encode(), partition=0)
    p.flush(15)
    p.close()
    c = KafkaConsumer(bootstrap_servers=sasl_broker["plain"], auto_offset_reset="earliest",
                      **sec)
    c.assign([TopicPartition(topic, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 15
    while len(got) < 5 and time.monotonic() < deadline:
        for recs in c.poll(500).values():
            got += [r.value for r in recs]
    c.close()
    assert got == [f"k{i}".encode() for i in range(5)]


@pytest.mark.peers
@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_aiokafka_authenticates_and_produces(sasl_broker, mech):
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider

    class Tokens(AbstractTokenProvider):
        async def token(self):
            return f"valid:{time.time() + 600}"

    sec = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mech}
    if mech == "OAUTHBEARER":
        sec["sasl_oauth_token_provider"] = Tokens()
    else:
        sec.update(sasl_plain_username="alice", sasl_plain_password="alice-secret")
    topic = f"aio-{uuid.uuid4().hex[:8]}"

    async def main() -> int:
        p = AIOKafkaProducer(bootstrap_servers=sasl_broker["plain"], **sec)
        await p.start()
        try:
            md = await p.send_and_wait(topic, b"hello", partition=0)
            return md.offset
        finally:
            await p.stop()
    with Admin(bootstrap_servers=sasl_broker["plain"], security_protocol="SASL_PLAINTEXT",
               sasl_username="alice", sasl_password="alice-secret", **FAST) as admin:
        admin.create_topics([topic], num_partitions=1)
    assert asyncio.run(main()) == 0
