"""Logging: debug contexts, what INFO says, and secrets that never appear, even at DEBUG."""

from __future__ import annotations

import base64
import logging
import time

import pytest

from kcodec.broker import Cluster
from kcodec.broker.security import (
    ListenerSecurity,
    OAuthBearerServer,
    PlainServer,
    ScramServer,
    TokenInfo,
    make_scram_credential,
)
from kcodec.client import Consumer, Producer, ProducerConfig
from kcodec.observe.log import CONTEXTS, Debug, debug_contexts, describe, redact
from kcodec.protocol import REQUESTS, ApiKey

PASSWORD = "pw-Zq81-never-logged"
# valid for a day: the module is imported at collection, and a whole run may pass before
# this test's turn comes
TOKEN = f"valid:{time.time() + 86400}:tok-Xk2-never-logged"
SSL_PASSWORD = "sslpw-Rr5-never-logged"
FAST = dict(api_timeout_ms=15000, request_timeout_ms=10000)


def test_contexts_from_the_setting_and_the_environment(monkeypatch):
    monkeypatch.delenv("KCODEC_DEBUG", raising=False)
    assert debug_contexts(None) == frozenset()
    assert debug_contexts("protocol, fetch") == {"protocol", "fetch"}
    assert debug_contexts("all") == set(CONTEXTS)
    assert debug_contexts("cgrp,eos") == {"consumer", "producer"}      # librdkafka's names
    monkeypatch.setenv("KCODEC_DEBUG", "broker")
    assert debug_contexts("msg") == {"msg", "broker"}
    with pytest.raises(ValueError, match="unknown context 'bogus'.*known: all, broker"):
        debug_contexts("bogus")


def test_the_debug_build_flag_in_the_environment_is_not_refused(monkeypatch):
    # KCODEC_DEBUG=1 also asks setup.py for a debug build: left set, it must not stop clients
    monkeypatch.setenv("KCODEC_DEBUG", "1")
    assert debug_contexts(None) == set(CONTEXTS)
    ProducerConfig(bootstrap_servers="127.0.0.1:1")   # refused "1" before
    monkeypatch.setenv("KCODEC_DEBUG", "0")
    assert debug_contexts("fetch") == {"fetch"}


def test_debug_is_off_unless_the_logger_is_at_debug(monkeypatch):
    monkeypatch.delenv("KCODEC_DEBUG", raising=False)
    lg = logging.getLogger("kcodec")
    old = lg.level
    try:
        lg.setLevel(logging.INFO)
        d = Debug(None)
        assert not any(getattr(d, c) for c in CONTEXTS)
        d = Debug("fetch")                # naming a context turns DEBUG on for it alone
        assert d.fetch and not d.protocol
        assert lg.isEnabledFor(logging.DEBUG)
    finally:
        lg.setLevel(old)


def test_describe_never_shows_bytes():
    body = REQUESTS[ApiKey.SASL_AUTHENTICATE](auth_bytes=b"\0user\0" + PASSWORD.encode())
    text = describe(body)
    assert PASSWORD not in text and "<" in text and "bytes>" in text
    assert describe([1, 2, 3] * 10).endswith("... 22 more]")


def test_redact():
    assert PASSWORD not in redact(f"sasl_password={PASSWORD} x")
    assert "p=***" in redact("c=biws,r=abcdefgh12345678,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert "Bearer ***" in redact("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc.def")
    assert redact("nothing secret here") == "nothing secret here"


def _validator(token: str, ext: dict) -> TokenInfo:
    kind, _, rest = token.partition(":")
    if kind != "valid":
        raise ValueError("bad token")
    return TokenInfo("oauth-user", expires_at=float(rest.split(":")[0]))


@pytest.fixture(scope="module")
def sasl_broker():
    users = {"alice": PASSWORD}
    creds = {m: {u: make_scram_credential(m, p) for u, p in users.items()}
             for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}
    sec = ListenerSecurity(sasl={
        "PLAIN": lambda: PlainServer(users),
        "SCRAM-SHA-256": lambda: ScramServer("SCRAM-SHA-256", creds["SCRAM-SHA-256"]),
        "SCRAM-SHA-512": lambda: ScramServer("SCRAM-SHA-512", creds["SCRAM-SHA-512"]),
        "OAUTHBEARER": lambda: OAuthBearerServer(_validator)})
    with Cluster(1, host="localhost", num_partitions=1, security=sec) as b:
        yield b


@pytest.mark.parametrize("mech", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_secrets_never_logged_even_at_debug_all(sasl_broker, mech, caplog, monkeypatch):
    monkeypatch.setenv("KCODEC_DEBUG", "all")        # the broker's request lines too
    sec: dict = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mech}
    if mech == "OAUTHBEARER":
        sec["sasl_oauth_token_provider"] = lambda: (TOKEN, time.time() + 600)
    else:
        sec.update(sasl_username="alice", sasl_password=PASSWORD)
    from kcodec.client.net import requests as client_requests

    sent: list[bytes] = []
    real = client_requests.sasl_authenticate

    def spy(auth_bytes: bytes):
        sent.append(bytes(auth_bytes))
        return real(auth_bytes)
    monkeypatch.setattr(client_requests, "sasl_authenticate", spy)
    with caplog.at_level(logging.DEBUG, logger="kcodec"):
        with Producer(bootstrap_servers=sasl_broker.bootstrap, debug="all", **FAST, **sec) as p:
            p.send("s", b"v", partition=0).result(10)
        with Consumer(bootstrap_servers=sasl_broker.bootstrap, debug="all", group_id="sg",
                      auto_offset_reset="earliest", **FAST, **sec) as c:
            c.subscribe("s")
            deadline = time.monotonic() + 10
            while not c.poll(0.5) and time.monotonic() < deadline:
                pass
    text = "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records)
    assert "SaslAuthenticate" in text            # the exchange was logged, described
    assert len(caplog.records) > 20
    secrets = [PASSWORD, TOKEN, TOKEN.split(":")[-1]]
    # every byte string the client sent in SaslAuthenticate (SCRAM's nonces and proofs)
    for auth in sent:
        raw = auth.decode("latin-1")
        secrets.append(raw)
        secrets += [part[2:] for part in raw.replace("\x01", ",").split(",")
                    if part[:2] in ("p=", "r=") or part.startswith("auth=Bearer ")]
        secrets.append(base64.b64encode(auth).decode())
    assert len(sent) >= 2 and len(secrets) > 3
    for s in secrets:
        assert s and s not in text, f"a secret reached the logs: {s[:12]}..."


def test_ssl_password_is_not_in_any_repr_or_log(caplog):
    from kcodec.client.config import ProducerConfig

    cfg = ProducerConfig(bootstrap_servers="127.0.0.1:9", ssl_password=SSL_PASSWORD,
                         sasl_password=PASSWORD, debug="all")
    assert SSL_PASSWORD not in repr(cfg) and PASSWORD not in repr(cfg)


def test_silent_until_the_application_configures_logging():
    """A library's warnings must not reach stderr through Python's last-resort handler."""
    import subprocess
    import sys

    code = ("import logging\nfrom kcodec.client.net import cluster\n"
            "logging.getLogger('kcodec.client.producer.sender').warning('must not show')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert "must not show" not in out.stderr
    code += "logging.basicConfig()\nlogging.getLogger('kcodec.x').warning('shows now')\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert "shows now" in out.stderr and "must not show" not in out.stderr
