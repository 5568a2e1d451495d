"""TLS and SASL on kcodec's own broker listeners: kcodec's client, confluent-kafka,
kafka-python and aiokafka authenticate with every mechanism over SASL_PLAINTEXT and
SASL_SSL and produce/consume; wrong passwords, expired tokens and unauthenticated requests
are refused."""

from __future__ import annotations

import time
import uuid

import pytest

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
from kcodec.client import Consumer, Producer
from kcodec.client.errors import SaslAuthenticationError
from tests.support.security_util import Certs

USERS = {"alice": "alice-secret"}
MECHS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
FAST = dict(api_timeout_ms=15000, request_timeout_ms=10000)


def _validator(token: str, ext: dict) -> TokenInfo:
    kind, _, exp = token.partition(":")
    if kind != "valid":
        raise ValueError("token signature is invalid")
    return TokenInfo("oauth-user", expires_at=float(exp))


def _sasl() -> dict:
    creds = {m: {u: make_scram_credential(m, p) for u, p in USERS.items()}
             for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}
    return {"PLAIN": lambda: PlainServer(USERS),
            "SCRAM-SHA-256": lambda: ScramServer("SCRAM-SHA-256", creds["SCRAM-SHA-256"]),
            "SCRAM-SHA-512": lambda: ScramServer("SCRAM-SHA-512", creds["SCRAM-SHA-512"]),
            "OAUTHBEARER": lambda: OAuthBearerServer(_validator)}


@pytest.fixture(scope="module")
def certs():
    c = Certs()
    yield c
    c.cleanup()


@pytest.fixture(scope="module", params=["SASL_PLAINTEXT", "SASL_SSL"])
def broker(request, certs):
    tls = request.param == "SASL_SSL"
    sec = ListenerSecurity(ssl_context=server_context(certs.certfile, certs.keyfile) if tls else None,
                           sasl=_sasl(), connections_max_reauth_ms=2000)
    with Cluster(1, host="localhost", num_partitions=1, security=sec) as b:
        yield {"bootstrap": b.bootstrap, "protocol": request.param, "cafile": certs.cafile}


def _token() -> tuple[str, float]:
    exp = time.time() + 600
    return f"valid:{exp}", exp


def _kcodec_sec(broker: dict, mech: str, password: str = "alice-secret") -> dict:
    sec: dict = {"security_protocol": broker["protocol"], "sasl_mechanism": mech}
    if broker["protocol"] == "SASL_SSL":
        sec["ssl_cafile"] = broker["cafile"]
    if mech == "OAUTHBEARER":
        sec["sasl_oauth_token_provider"] = _token
    else:
        sec.update(sasl_username="alice", sasl_password=password)
    return sec


@pytest.mark.parametrize("mech", MECHS)
def test_kcodec_client(broker, mech):
    topic = f"k-{uuid.uuid4().hex[:8]}"
    sec = _kcodec_sec(broker, mech)
    with Producer(bootstrap_servers=broker["bootstrap"], **FAST, **sec) as p:
        for i in range(10):
            p.send(topic, f"v{i}".encode(), partition=0)
        p.flush(10)
    with Consumer(bootstrap_servers=broker["bootstrap"], auto_offset_reset="earliest",
                  group_id=f"g-{topic}", **FAST, **sec) as c:
        c.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 15
        while len(got) < 10 and time.monotonic() < deadline:
            for recs in c.poll(0.5).values():
                got += [r.value for r in recs]
    assert got == [f"v{i}".encode() for i in range(10)]


@pytest.mark.peers
@pytest.mark.parametrize("mech", MECHS)
def test_confluent_kafka(broker, mech):
    import confluent_kafka

    conf = {"bootstrap.servers": broker["bootstrap"],
            "security.protocol": broker["protocol"].lower(), "sasl.mechanism": mech}
    if broker["protocol"] == "SASL_SSL":
        conf["ssl.ca.location"] = broker["cafile"]
    if mech == "OAUTHBEARER":
        conf["oauth_cb"] = lambda _cfg: (_token()[0], _token()[1])
    else:
        conf.update({"sasl.username": "alice", "sasl.password": "alice-secret"})
    topic = f"c-{uuid.uuid4().hex[:8]}"
    p = confluent_kafka.Producer(conf)
    for i in range(5):
        p.produce(topic, f"c{i}".encode(), partition=0)
    assert p.flush(15) == 0
    c = confluent_kafka.Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    try:
        c.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 15
        while len(got) < 5 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        assert got == [f"c{i}".encode() for i in range(5)]
    finally:
        c.close()


@pytest.mark.peers
@pytest.mark.parametrize("mech", MECHS)
def test_kafka_python(broker, mech):
    import ssl

    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Tokens(AbstractTokenProvider):
        def token(self):
            return _token()[0]

    sec: dict = {"security_protocol": broker["protocol"], "sasl_mechanism": mech}
    if broker["protocol"] == "SASL_SSL":
        sec["ssl_context"] = ssl.create_default_context(cafile=broker["cafile"])
    if mech == "OAUTHBEARER":
        sec["sasl_oauth_token_provider"] = Tokens()
    else:
        sec.update(sasl_plain_username="alice", sasl_plain_password="alice-secret")
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    p = KafkaProducer(bootstrap_servers=broker["bootstrap"], **sec)
    for i in range(5):
        p.send(topic, f"k{i}".encode(), partition=0)
    p.flush(15)
    p.close()
    c = KafkaConsumer(bootstrap_servers=broker["bootstrap"], auto_offset_reset="earliest", **sec)
    c.assign([TopicPartition(topic, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 15
    while len(got) < 5 and time.monotonic() < deadline:
        for recs in c.poll(500).values():
            got += [r.value for r in recs]
    c.close()
    assert got == [f"k{i}".encode() for i in range(5)]


@pytest.mark.peers
@pytest.mark.parametrize("mech", MECHS)
def test_aiokafka(broker, mech):
    import asyncio
    import ssl

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.abc import AbstractTokenProvider

    class Tokens(AbstractTokenProvider):
        async def token(self):
            return _token()[0]

    sec: dict = {"security_protocol": broker["protocol"], "sasl_mechanism": mech}
    if broker["protocol"] == "SASL_SSL":
        sec["ssl_context"] = ssl.create_default_context(cafile=broker["cafile"])
    if mech == "OAUTHBEARER":
        sec["sasl_oauth_token_provider"] = Tokens()
    else:
        sec.update(sasl_plain_username="alice", sasl_plain_password="alice-secret")
    topic = f"aio-{uuid.uuid4().hex[:8]}"

    async def main() -> list[bytes]:
        p = AIOKafkaProducer(bootstrap_servers=broker["bootstrap"], **sec)
        await p.start()
        try:
            for i in range(5):
                await p.send_and_wait(topic, f"a{i}".encode(), partition=0)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=broker["bootstrap"],
                             auto_offset_reset="earliest", **sec)
        await c.start()
        try:
            c.assign([TopicPartition(topic, 0)])
            got: list[bytes] = []
            deadline = time.monotonic() + 15
            while len(got) < 5 and time.monotonic() < deadline:
                for recs in (await c.getmany(timeout_ms=500)).values():
                    got += [r.value for r in recs]
            return got
        finally:
            await c.stop()
    assert asyncio.run(main()) == [f"a{i}".encode() for i in range(5)]


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wrong_password_fails_fast(broker, mech):
    t = time.monotonic()
    with pytest.raises(SaslAuthenticationError, match="alice") as ei:
        Producer(bootstrap_servers=broker["bootstrap"], **FAST,
                 **_kcodec_sec(broker, mech, password="not-it-77"))
    assert time.monotonic() - t < 5 and "not-it-77" not in str(ei.value)


def test_expired_token_and_unauthenticated_requests_are_refused(broker):
    sec = _kcodec_sec(broker, "OAUTHBEARER")
    sec["sasl_oauth_token_provider"] = lambda: ("valid:1", time.time() + 60)
    with pytest.raises(SaslAuthenticationError, match="expired"):
        Producer(bootstrap_servers=broker["bootstrap"], **FAST, **sec)
    from kcodec.client import Admin
    from kcodec.client.errors import BrokerNotAvailableError, KafkaTimeoutError

    plain = {} if broker["protocol"] == "SASL_PLAINTEXT" else {
        "security_protocol": "SSL", "ssl_cafile": broker["cafile"]}
    with pytest.raises((BrokerNotAvailableError, KafkaTimeoutError)):
        with Admin(bootstrap_servers=broker["bootstrap"], api_timeout_ms=2000,
                   request_timeout_ms=1000, **plain) as admin:
            admin.list_topics()     # Metadata before authenticating: the broker hangs up


def test_sessions_are_reauthenticated(certs):
    """connections_max_reauth_ms=800: a producer working for longer re-authenticates on the
    same connections (KIP-368) instead of being cut off."""
    sec = ListenerSecurity(ssl_context=server_context(certs.certfile, certs.keyfile),
                           sasl=_sasl(), connections_max_reauth_ms=800)
    with Cluster(1, host="localhost", num_partitions=1, security=sec) as b:
        broker = {"bootstrap": b.bootstrap, "protocol": "SASL_SSL", "cafile": certs.cafile}
        topic = f"re-{uuid.uuid4().hex[:8]}"
        with Producer(bootstrap_servers=b.bootstrap, **FAST,
                      **_kcodec_sec(broker, "SCRAM-SHA-512")) as p:
            deadline = time.monotonic() + 2.5
            n = 0
            while time.monotonic() < deadline:
                assert p.send(topic, b"x", partition=0).result(10).offset == n
                n += 1
                time.sleep(0.1)
            gates = [c.attrs["sasl"] for node in b.nodes.values()
                     for proc in node._parts[1] for c in proc.connections.values()]
        assert n > 10
        assert sum(g.auth.reauthentications for g in gates) >= 2


def test_broker_command_line_security_options(certs, tmp_path):
    from kcodec.cli import build_parser
    from kcodec.cli._security import broker_security

    users = tmp_path / "users"
    users.write_text("# user:password\nalice:alice-secret\n")
    args = build_parser().parse_args(["broker", "--ssl-certfile", certs.certfile, "--ssl-keyfile",
                                      certs.keyfile, "--sasl-users", str(users)])
    sec = broker_security(args)
    assert sec.protocol == "SASL_SSL"
    assert sorted(sec.sasl) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    with Cluster(1, host="localhost", security=sec) as b:
        with Producer(bootstrap_servers=b.bootstrap, **FAST,
                      **_kcodec_sec({"protocol": "SASL_SSL", "cafile": certs.cafile},
                                    "SCRAM-SHA-256")) as p:
            assert p.send("cli", b"x").result(10).offset == 0
    assert broker_security(build_parser().parse_args(["broker"])) is None
    users.write_text("no-colon\n")
    with pytest.raises(ValueError, match="user:password"):
        broker_security(build_parser().parse_args(["broker", "--sasl-users", str(users)]))
