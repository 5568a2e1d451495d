"""JwksValidator: signed JWTs checked against a JWKS served over HTTP, as Kafka's OIDC
validation (KIP-768) checks them."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

# cryptography comes with the test extra (trustme needs it): no skip hides its absence
from cryptography.hazmat.primitives import hashes  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils  # noqa: E402

from kcodec.broker.config.types import ConfigError  # noqa: E402
from kcodec.broker.security import JwksValidator, OAuthBearerServer  # noqa: E402
from kcodec.broker.security.sasl import SaslAuthenticationFailed  # noqa: E402

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64_int(n: int, size: int | None = None) -> str:
    return b64(n.to_bytes(size or (n.bit_length() + 7) // 8, "big"))


def jwk(key: Any, kid: str) -> dict[str, str]:
    pub = key.public_key().public_numbers()
    if isinstance(key, rsa.RSAPrivateKey):
        return {"kty": "RSA", "kid": kid, "use": "sig", "n": b64_int(pub.n), "e": b64_int(pub.e)}
    return {"kty": "EC", "kid": kid, "crv": "P-256", "x": b64_int(pub.x, 32),
            "y": b64_int(pub.y, 32)}


def sign(claims: dict[str, Any], key: Any = RSA_KEY, kid: str = "k1",
         alg: str = "RS256") -> str:
    head = b64(json.dumps({"alg": alg, "kid": kid, "typ": "JWT"}).encode())
    body = b64(json.dumps(claims).encode())
    signed = f"{head}.{body}".encode()
    if alg == "RS256":
        sig = key.sign(signed, padding.PKCS1v15(), hashes.SHA256())
    elif alg == "PS256":
        sig = key.sign(signed, padding.PSS(padding.MGF1(hashes.SHA256()), 32), hashes.SHA256())
    else:
        r, s = utils.decode_dss_signature(key.sign(signed, ec.ECDSA(hashes.SHA256())))
        sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return f"{head}.{body}.{b64(sig)}"


def claims(**over: Any) -> dict[str, Any]:
    now = int(time.time())
    c: dict[str, Any] = {"sub": "alice", "iat": now, "exp": now + 600,
                         "iss": "https://idp.test", "aud": ["kafka"], "scope": "read write"}
    c.update(over)
    return {k: v for k, v in c.items() if v is not None}


class Jwks:
    """A JWKS served on 127.0.0.1; ``keys`` may be changed, ``hits`` counts fetches."""

    def __init__(self) -> None:
        self.keys = [jwk(RSA_KEY, "k1"), jwk(EC_KEY, "e1")]
        self.hits = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.hits += 1
                body = json.dumps({"keys": outer.keys}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def jwks() -> Iterator[Jwks]:
    j = Jwks()
    yield j
    j.close()


def validator(url: str, **config: Any) -> JwksValidator:
    return JwksValidator({"sasl.oauthbearer.jwks.endpoint.url": url,
                          **{k.replace("_", "."): v for k, v in config.items()}})


def test_good_token_gives_principal_expiry_and_scope(jwks: Jwks) -> None:
    c = claims()
    info = validator(jwks.url)(sign(c), {})
    assert info.principal == "alice"
    assert info.expires_at == c["exp"]
    assert info.scope == ("read", "write")


@pytest.mark.parametrize("alg,key,kid", [("PS256", RSA_KEY, "k1"), ("ES256", EC_KEY, "e1")])
def test_other_algorithms(jwks: Jwks, alg: str, key: Any, kid: str) -> None:
    assert validator(jwks.url)(sign(claims(), key, kid, alg), {}).principal == "alice"


def test_expired_token_beyond_clock_skew(jwks: Jwks) -> None:
    v = validator(jwks.url, **{"sasl.oauthbearer.clock.skew.seconds": "30"})
    with pytest.raises(ValueError, match="expired"):
        v(sign(claims(exp=int(time.time()) - 60)), {})
    # within the skew it is still good
    assert v(sign(claims(exp=int(time.time()) - 5)), {}).principal == "alice"


def test_not_yet_valid(jwks: Jwks) -> None:
    with pytest.raises(ValueError, match="nbf .* in the future"):
        validator(jwks.url)(sign(claims(nbf=int(time.time()) + 600)), {})


def test_wrong_signature(jwks: Jwks) -> None:
    with pytest.raises(ValueError, match="signature does not verify"):
        validator(jwks.url)(sign(claims(), OTHER_KEY), {})


def test_tampered_claims(jwks: Jwks) -> None:
    head, _, sig = sign(claims()).split(".")
    forged = b64(json.dumps(claims(sub="admin")).encode())
    with pytest.raises(ValueError, match="signature"):
        validator(jwks.url)(f"{head}.{forged}.{sig}", {})


def test_alg_none_refused(jwks: Jwks) -> None:
    head = b64(json.dumps({"alg": "none"}).encode())
    with pytest.raises(ValueError, match="alg 'none'"):
        validator(jwks.url)(f"{head}.{b64(json.dumps(claims()).encode())}.", {})


def test_audience_and_issuer(jwks: Jwks) -> None:
    v = validator(jwks.url, **{"sasl.oauthbearer.expected.audience": "other,kafka",
                               "sasl.oauthbearer.expected.issuer": "https://idp.test"})
    assert v(sign(claims()), {}).principal == "alice"
    with pytest.raises(ValueError, match="audience"):
        v(sign(claims(aud="elsewhere")), {})
    with pytest.raises(ValueError, match="issuer"):
        v(sign(claims(iss="https://evil.test")), {})


def test_sub_claim_name_and_missing_claims(jwks: Jwks) -> None:
    v = validator(jwks.url, **{"sasl.oauthbearer.sub.claim.name": "client_id"})
    assert v(sign(claims(client_id="svc-1")), {}).principal == "svc-1"
    with pytest.raises(ValueError, match="no client_id claim"):
        v(sign(claims()), {})
    with pytest.raises(ValueError, match="no exp claim"):
        validator(jwks.url)(sign(claims(exp=None)), {})


def test_unknown_kid_fetches_again_then_refuses(jwks: Jwks) -> None:
    v = validator(jwks.url, **{"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "0"})
    assert v(sign(claims()), {}).principal == "alice"
    assert jwks.hits == 1
    with pytest.raises(ValueError, match="no key with kid 'k2'"):
        v(sign(claims(), OTHER_KEY, "k2"), {})
    assert jwks.hits == 2
    # the provider rotates its keys: the new kid is found by fetching again
    jwks.keys.append(jwk(OTHER_KEY, "k2"))
    assert v(sign(claims(), OTHER_KEY, "k2"), {}).principal == "alice"
    assert jwks.hits == 3


def test_jwks_cached_until_refresh(jwks: Jwks) -> None:
    now = [time.time()]
    v = JwksValidator({"sasl.oauthbearer.jwks.endpoint.url": jwks.url,
                       "sasl.oauthbearer.jwks.endpoint.refresh.ms": "60000"},
                      clock=lambda: now[0])
    for _ in range(3):
        v(sign(claims()), {})
    assert jwks.hits == 1
    now[0] += 61
    v(sign(claims(exp=int(now[0]) + 600)), {})
    assert jwks.hits == 2


def test_jwks_unreachable(jwks: Jwks) -> None:
    url = jwks.url
    jwks.close()
    with pytest.raises(ValueError, match="cannot fetch the JWKS"):
        validator(url)(sign(claims()), {})


def test_config_errors() -> None:
    with pytest.raises(ConfigError, match="is not set"):
        JwksValidator({})
    with pytest.raises(ConfigError, match="http"):
        validator("ftp://idp/jwks")


def test_oauthbearer_exchange_refuses_with_error_document(jwks: Jwks) -> None:
    v = validator(jwks.url)

    def message(token: str) -> bytes:
        return f"n,,\x01auth=Bearer {token}\x01\x01".encode()

    good = OAuthBearerServer(v)
    assert good.step(message(sign(claims()))) == b""
    assert good.done and good.principal == "alice"
    bad = OAuthBearerServer(v)
    assert json.loads(bad.step(message(sign(claims(), OTHER_KEY)))) == {"status": "invalid_token"}
    assert bad.detail is not None and "signature" in bad.detail
    with pytest.raises(SaslAuthenticationFailed, match="not valid"):
        bad.step(b"\x01")


def test_without_cryptography_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    for name in [m for m in sys.modules if m.split(".")[0] == "cryptography"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "cryptography", None)
    with pytest.raises(ConfigError, match="pip install cryptography"):
        validator("http://127.0.0.1:1/jwks")


def test_cli_broker_oauthbearer_needs_the_jwks_url() -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "kcodec", "broker", "--listeners",
                          "SASL_PLAINTEXT://127.0.0.1:0", "--sasl-mechanisms", "OAUTHBEARER"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "OAUTHBEARER needs --config sasl.oauthbearer.jwks.endpoint.url=URL" in out.stderr
