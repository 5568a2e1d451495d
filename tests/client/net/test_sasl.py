"""SASL mechanisms, client and broker side: RFC vectors, each side against an independent
implementation (scramp), and the broker's per-connection authentication state."""

from __future__ import annotations

import base64
import json

import pytest

from kcodec.broker.security import (
    OAuthBearerServer,
    PlainServer,
    SaslAuthenticationFailed,
    SaslAuthenticator,
    ScramServer,
    TokenInfo,
    make_scram_credential,
)
from kcodec.client.net.sasl import (
    OAuthBearer,
    OAuthToken,
    Plain,
    SaslMechanismError,
    Scram,
    TokenCache,
)

# RFC 7677 section 3 (SCRAM-SHA-256), user "user", password "pencil"
RFC7677 = dict(
    nonce="rOprNGfwEbeRWgbNEkqO",
    server_first=b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                 b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    client_final=b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                 b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    server_final=b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
)


def test_scram_sha256_client_matches_rfc7677():
    c = Scram("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677["nonce"])
    assert c.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert c.step(RFC7677["server_first"]) == RFC7677["client_final"]
    assert c.step(RFC7677["server_final"]) is None
    assert c.done


def test_scram_sha256_server_matches_rfc7677():
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = make_scram_credential("SCRAM-SHA-256", "pencil", 4096, salt)
    s = ScramServer("SCRAM-SHA-256", {"user": cred}, nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    assert s.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO") == RFC7677["server_first"]
    assert s.step(RFC7677["client_final"]) == RFC7677["server_final"]
    assert s.done and s.principal == "user"


def test_scram_client_rejects_a_forged_server_signature():
    c = Scram("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677["nonce"])
    c.first()
    c.step(RFC7677["server_first"])
    with pytest.raises(SaslMechanismError, match="signature"):
        c.step(b"v=" + base64.b64encode(b"\0" * 32))
    assert not c.done


@pytest.mark.parametrize("bad", [b"r=other,s=AAAA,i=4096", b"garbage", b"r=rOprNGfwEbeRWgbNEkqOx,s=!!,i=1",
                                 b"r=rOprNGfwEbeRWgbNEkqOx,s=AAAA,i=999999999", b"e=unknown-user"])
def test_scram_client_rejects_bad_server_first(bad):
    c = Scram("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677["nonce"])
    c.first()
    with pytest.raises(SaslMechanismError):
        c.step(bad)


@pytest.mark.peers
@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_against_scramp_server(mech):
    import scramp

    salt, stored, server_key, iters = scramp.ScramMechanism(mech).make_auth_info("s3cr3t=,x")
    m = scramp.ScramMechanism(mech)
    srv = m.make_server(lambda user: (salt, stored, server_key, iters))
    c = Scram(mech, "al,ice=", "s3cr3t=,x")
    srv.set_client_first(c.first().decode())
    final = c.step(srv.get_server_first().encode())
    srv.set_client_final(final.decode())
    assert c.step(srv.get_server_final().encode()) is None
    assert c.done


@pytest.mark.peers
@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_server_against_scramp_client(mech):
    import scramp

    cred = make_scram_credential(mech, "pässword")
    s = ScramServer(mech, {"bob": cred})
    cli = scramp.ScramClient([mech], "bob", "pässword")
    out = s.step(cli.get_client_first().encode())
    cli.set_server_first(out.decode())
    out = s.step(cli.get_client_final().encode())
    cli.set_server_final(out.decode())     # scramp verifies our server signature
    assert s.principal == "bob"


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_wrong_password_and_unknown_user_fail_alike(mech):
    creds = {"bob": make_scram_credential(mech, "right")}
    for user, pw in (("bob", "wrong"), ("nobody", "right")):
        c = Scram(mech, user, pw)
        s = ScramServer(mech, creds)
        final = c.step(s.step(c.first()))
        with pytest.raises(SaslAuthenticationFailed) as ei:
            s.step(final)
        assert "invalid credentials" in str(ei.value)
        assert pw not in str(ei.value)


@pytest.mark.parametrize("first, final", [
    (b"n,,n=bob,r=abc,garbage", None),          # a client-first attribute without "="
    (b"n,,n=bob,r=\xff", None),                  # not UTF-8
    (None, b"c=biws,oops"),                      # a client-final attribute without "="
])
def test_scram_server_refuses_malformed_messages_as_a_failed_authentication(first, final):
    """The broker answers a malformed SCRAM message with SASL_AUTHENTICATION_FAILED: its
    authenticator catches SaslAuthenticationFailed only (the shared parser raises the
    caller's class; it used to raise the client's SaslMechanismError, which escaped)."""
    s = ScramServer("SCRAM-SHA-256", {"bob": make_scram_credential("SCRAM-SHA-256", "pw")})
    if first is None:
        s.step(Scram("SCRAM-SHA-256", "bob", "pw").first())
    with pytest.raises(SaslAuthenticationFailed, match="message"):
        s.step(first if first is not None else final)


def test_scram_maths_is_shared_by_client_and_broker():
    """One module holds the SCRAM maths and syntax (kcodec.sasl.scram): RFC 7677's key
    derivation, and the attribute parser raising the class the caller names."""
    import base64
    import hashlib
    import hmac

    from kcodec.sasl import scram

    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    salted = scram.salted_password("sha256", "pencil", salt, 4096)
    client_key, stored_key, server_key = scram.keys("sha256", salted)
    assert stored_key == hashlib.sha256(client_key).digest()
    assert server_key == hmac.new(salted, b"Server Key", "sha256").digest()
    assert scram.parse_attributes(b"r=a,s=b,r=c", "x") == {"r": "a", "s": "b"}
    with pytest.raises(scram.ScramFormatError, match="SCRAM x has a malformed attribute"):
        scram.parse_attributes(b"r=a,zz", "x")
    with pytest.raises(SaslMechanismError, match="not UTF-8"):
        scram.parse_attributes(b"\xff", "x", SaslMechanismError)
    assert scram.escape_name("a=b,c") == "a=3Db=2Cc"


def test_credentials_keep_no_password_and_hide_keys():
    cred = make_scram_credential("SCRAM-SHA-512", "hunter2")
    assert "hunter2" not in repr(cred) and "stored_key" not in repr(cred)
    with pytest.raises(ValueError):
        make_scram_credential("SCRAM-SHA-512", "x", iterations=10)


def test_plain_both_sides():
    c = Plain("alice", "pw\u00e9")
    s = PlainServer({"alice": "pw\u00e9"})
    assert s.step(c.first()) == b""
    assert s.principal == "alice"
    c.step(b"")
    assert c.done
    assert "pw" not in repr(c)
    s2 = PlainServer({"alice": "other"})
    with pytest.raises(SaslAuthenticationFailed) as ei:
        s2.step(Plain("alice", "guess").first())
    assert "guess" not in str(ei.value) and "other" not in str(ei.value)
    with pytest.raises(SaslAuthenticationFailed):
        PlainServer({"a": "b"}).step(b"no-separators")
    assert PlainServer(lambda u, p: p == "x" + u).step(b"\0bob\0xbob") == b""


def _jwt(claims: dict) -> str:
    def enc(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    return f"{enc({'alg': 'none'})}.{enc(claims)}.sig"


def test_oauthbearer_both_sides_and_refusal():
    now = 1_000_000.0
    seen = {}

    def validator(token, ext):
        seen.update(ext)
        if token != "good":
            raise ValueError("signature check failed")
        return TokenInfo("svc-account", expires_at=now + 60)

    tok = OAuthToken("good", now + 60, {"traceId": "abc"})
    c = OAuthBearer(tok)
    s = OAuthBearerServer(validator, clock=lambda: now)
    assert s.step(c.first()) == b""
    assert s.principal == "svc-account" and s.session_expires_at == now + 60
    assert seen == {"traceId": "abc"}
    assert "good" not in repr(tok)

    c = OAuthBearer(OAuthToken("bad"))
    s = OAuthBearerServer(validator, clock=lambda: now)
    doc = s.step(c.first())
    assert json.loads(doc)["status"] == "invalid_token"
    ack = c.step(doc)
    assert ack == b"\x01"
    # the validator's reason stays in the broker's log: the client hears a generic refusal
    with pytest.raises(SaslAuthenticationFailed, match="token refused") as refused:
        s.step(ack)
    assert "signature check failed" not in str(refused.value)


def test_oauthbearer_server_refuses_expired_token():
    s = OAuthBearerServer(lambda t, e: TokenInfo("p", expires_at=99.0), clock=lambda: 100.0)
    c = OAuthBearer(OAuthToken("t"))
    with pytest.raises(SaslAuthenticationFailed, match="expired"):
        s.step(c.step(s.step(c.first())))


def test_token_cache_refreshes_before_expiry_and_reads_jwt_exp():
    now = [1000.0]
    calls = []

    def provider():
        calls.append(now[0])
        return _jwt({"exp": now[0] + 100, "sub": "x"})

    cache = TokenCache(provider, 0.8, clock=lambda: now[0])
    t1 = cache.token()
    assert t1.expires_at == 1100.0
    now[0] = 1079.0
    assert cache.token() is t1          # 79% of the lifetime: still good
    now[0] = 1081.0
    t2 = cache.token()                 # past 80%: a new one, before the old one expires
    assert t2 is not t1 and len(calls) == 2
    with pytest.raises(SaslMechanismError, match="expired"):
        TokenCache(lambda: ("tok", 5.0), clock=lambda: 10.0).token()
    assert TokenCache(lambda: "opaque").token().expires_at is None


# --------------------------------------------------------------------- the authenticator
def _auth(**kw):
    return SaslAuthenticator({"PLAIN": lambda: PlainServer({"u": "p"}),
                              "SCRAM-SHA-256": lambda: ScramServer(
                                  "SCRAM-SHA-256",
                                  {"u": make_scram_credential("SCRAM-SHA-256", "p")})}, **kw)


def test_authenticator_gates_requests_until_authenticated():
    a = _auth()
    assert a.allowed(18) and a.allowed(17) and a.allowed(36)
    assert not a.allowed(3) and not a.allowed(0)
    r = a.handshake({"mechanism": "GSSAPI"})
    assert r["error_code"] == 33 and r["mechanisms"] == ["PLAIN", "SCRAM-SHA-256"]
    assert a.close_after


def test_authenticator_wrong_password_closes_with_sasl_authentication_failed():
    a = _auth()
    assert a.handshake({"mechanism": "PLAIN"})["error_code"] == 0
    r = a.authenticate({"auth_bytes": b"\0u\0wrong"})
    assert r["error_code"] == 58 and "invalid username or password" in r["error_message"]
    assert "wrong" not in r["error_message"]
    assert a.close_after and not a.allowed(3)


def test_authenticator_scram_then_reauth_with_lifetime():
    now = [0.0]
    a = _auth(connections_max_reauth_ms=10_000, clock=lambda: now[0])
    assert a.authenticate({"auth_bytes": b"x"})["error_code"] == 34     # no handshake first
    a = _auth(connections_max_reauth_ms=10_000, clock=lambda: now[0])
    for round_ in range(2):
        assert a.handshake({"mechanism": "SCRAM-SHA-256"})["error_code"] == 0
        c = Scram("SCRAM-SHA-256", "u", "p")
        r = a.authenticate({"auth_bytes": c.first()})
        assert r["error_code"] == 0 and not a.allowed(3) or round_ == 1
        r = a.authenticate({"auth_bytes": c.step(r["auth_bytes"])})
        assert r["error_code"] == 0 and r["session_lifetime_ms"] == 10_000
        c.step(r["auth_bytes"])
        assert c.done and a.allowed(3) and a.principal == "u"
        now[0] += 11                                  # session over: must re-authenticate
        assert not a.allowed(3)
    assert a.reauthentications == 1
    # a re-authentication may not switch mechanism
    assert a.handshake({"mechanism": "PLAIN"})["error_code"] == 34 and a.close_after
