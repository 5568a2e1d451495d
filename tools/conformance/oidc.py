"""A mock OIDC identity provider for the OAUTHBEARER/OIDC tests (``OIDC_TESTS``): an HTTP
server on 127.0.0.1 handing out JWTs signed with an RSA key it makes, and its JWKS.

    POST /token     grant_type=client_credentials (HTTP Basic client id and secret) or
                    grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=JWT
                    (RS256-signed by the client key, ``client_key_file``) -> a good token
    GET  /token     Azure IMDS (header ``Metadata: true``; api-version, resource and
                    client_id in the query) -> a good token
    POST /expired   as /token, a token that expired an hour ago
    POST /invalid   as /token, a token signed by a key the JWKS does not have (same kid)
    GET  /jwks      the JWKS: the signing key's public half

A token's claims: ``sub`` (the client id, or the assertion's sub), ``client_id``, ``iss``,
``aud`` (:data:`AUDIENCE`), ``iat``, ``exp``, ``scope`` (when asked for). A scope named
``invalid_scope`` is refused as an OAuth server refuses an unknown scope.

Needs the ``cryptography`` package (a test dependency of kcodec).
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

CLIENT_ID = "kcodec-oidc-client"
CLIENT_SECRET = "kcodec-oidc-secret"
AUDIENCE = "kafka"
KID = "kcodec-conformance"
LIFETIME_S = 3600
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
KEY_PASSWORD = "kcodec-key-password"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign_jwt(claims: dict[str, Any], key: rsa.RSAPrivateKey, kid: str = KID) -> str:
    """An RS256 JWS of ``claims``."""
    head = _b64(json.dumps({"alg": "RS256", "typ": "JWT", "kid": kid}).encode())
    body = _b64(json.dumps(claims).encode())
    sig = key.sign(f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{head}.{body}.{_b64(sig)}"


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class Refused(Exception):
    """The request is answered 400/401 with an OAuth error document."""

    def __init__(self, status: int, error: str, why: str) -> None:
        super().__init__(why)
        self.status, self.error = status, error


class Provider:
    """The mock provider, serving from a thread until :meth:`close`; ``work`` holds the
    client key files (for the jwt-bearer grant)."""

    def __init__(self, work: Path) -> None:
        self.key = _new_key()
        self.stranger = _new_key()        # signs the invalid tokens
        self.client_key = _new_key()      # the clients' assertion key
        work.mkdir(parents=True, exist_ok=True)
        self.client_key_file = work / "client-key.pem"
        self.client_key_file.write_bytes(self.client_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))
        self.client_key_encrypted_file = work / "client-key-encrypted.pem"
        self.client_key_encrypted_file.write_bytes(self.client_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(KEY_PASSWORD.encode())))
        self.requests: list[str] = []     # "METHOD path -> status", for the log
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                provider._answer(self, "GET")

            def do_POST(self) -> None:
                provider._answer(self, "POST")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.issuer = self.base
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True,
                                        name="mock-oidc")
        self._thread.start()

    @property
    def jwks_url(self) -> str:
        return f"{self.base}/jwks"

    def url(self, kind: str = "token") -> str:
        return f"{self.base}/{kind}"

    def jwks(self) -> dict[str, Any]:
        pub = self.key.public_key().public_numbers()
        return {"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": KID,
                          "n": _b64(pub.n.to_bytes((pub.n.bit_length() + 7) // 8, "big")),
                          "e": _b64(pub.e.to_bytes((pub.e.bit_length() + 7) // 8, "big"))}]}

    def env(self) -> dict[str, str]:
        """The variables librdkafka's 0126 reads."""
        return {"VALID_OIDC_URL": self.url("token"),
                "EXPIRED_TOKEN_OIDC_URL": self.url("expired"),
                "INVALID_OIDC_URL": self.url("invalid"),
                "OAUTHBEARER_CLIENT_PRIVATE_KEY": str(self.client_key_file),
                "OAUTHBEARER_CLIENT_PRIVATE_KEY_ENCRYPTED": str(self.client_key_encrypted_file),
                "OAUTHBEARER_CLIENT_PRIVATE_KEY_PASSWORD": KEY_PASSWORD}

    def client_conf(self) -> str:
        """test.conf lines of an OIDC client of this provider."""
        return ("sasl.mechanisms=OAUTHBEARER\nsasl.oauthbearer.method=oidc\n"
                f"sasl.oauthbearer.client.id={CLIENT_ID}\n"
                f"sasl.oauthbearer.client.secret={CLIENT_SECRET}\n"
                f"sasl.oauthbearer.token.endpoint.url={self.url('token')}\n")

    def broker_config(self) -> dict[str, str]:
        """The broker configs validating this provider's tokens."""
        return {"sasl.oauthbearer.jwks.endpoint.url": self.jwks_url,
                "sasl.oauthbearer.expected.audience": AUDIENCE,
                "sasl.oauthbearer.expected.issuer": self.issuer}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------------ answers
    def token(self, subject: str, scope: str | None, kind: str = "token") -> str:
        now = int(time.time())
        claims: dict[str, Any] = {"sub": subject, "client_id": subject, "iss": self.issuer,
                                  "aud": AUDIENCE, "iat": now, "exp": now + LIFETIME_S}
        if kind == "expired":
            claims.update(iat=now - 2 * LIFETIME_S, exp=now - LIFETIME_S)
        if scope:
            claims["scope"] = scope
        return sign_jwt(claims, self.stranger if kind == "invalid" else self.key)

    def _answer(self, req: BaseHTTPRequestHandler, method: str) -> None:
        url = urllib.parse.urlsplit(req.path)
        kind = url.path.strip("/")
        status, doc = 200, {}
        try:
            if method == "GET" and kind == "jwks":
                doc = self.jwks()
            elif kind in ("token", "expired", "invalid"):
                if method == "GET":
                    subject, scope = self._imds(req, urllib.parse.parse_qs(url.query))
                else:
                    length = int(req.headers.get("Content-Length") or 0)
                    form = urllib.parse.parse_qs(req.rfile.read(length).decode())
                    subject, scope = self._grant(req, form)
                doc = {"access_token": self.token(subject, scope, kind),
                       "token_type": "Bearer", "expires_in": LIFETIME_S}
            else:
                raise Refused(404, "not_found", f"no {method} {url.path} here")
        except Refused as exc:
            status, doc = exc.status, {"error": exc.error, "error_description": str(exc)}
        body = json.dumps(doc).encode()
        self.requests.append(f"{method} {url.path} -> {status}")
        req.send_response(status)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)

    def _grant(self, req: BaseHTTPRequestHandler, form: dict[str, list[str]]
               ) -> tuple[str, str | None]:
        grant = form.get("grant_type", [""])[0]
        scope = form.get("scope", [None])[0]
        if scope == "invalid_scope":
            raise Refused(400, "invalid_scope", "the scope invalid_scope is unknown here")
        if grant == "client_credentials":
            auth = req.headers.get("Authorization", "")
            try:
                user, _, secret = base64.b64decode(auth.partition(" ")[2]).decode() \
                    .partition(":")
            except (binascii.Error, UnicodeDecodeError):
                user = secret = ""
            if not auth.lower().startswith("basic ") or (user, secret) != (CLIENT_ID,
                                                                            CLIENT_SECRET):
                raise Refused(401, "invalid_client", "unknown client id or wrong secret")
            return user, scope
        if grant == JWT_BEARER:
            return self._assertion(form.get("assertion", [""])[0]), scope
        raise Refused(400, "unsupported_grant_type", f"grant_type {grant!r}")

    def _assertion(self, jwt: str) -> str:
        """The subject of a client's RS256 assertion signed by the client key."""
        parts = jwt.split(".")
        try:
            if len(parts) != 3:
                raise ValueError("not a JWS")
            head = json.loads(_unb64(parts[0]))
            claims = json.loads(_unb64(parts[1]))
            if head.get("alg") != "RS256":
                raise ValueError(f"alg {head.get('alg')!r}")
            self.client_key.public_key().verify(
                _unb64(parts[2]), f"{parts[0]}.{parts[1]}".encode(), padding.PKCS1v15(),
                hashes.SHA256())
        except (ValueError, binascii.Error, InvalidSignature) as exc:
            raise Refused(400, "invalid_grant", f"the assertion does not verify: {exc}") \
                from None
        if not isinstance(claims.get("exp"), (int, float)) or claims["exp"] < time.time():
            raise Refused(400, "invalid_grant", "the assertion has expired")
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            raise Refused(400, "invalid_grant", "the assertion has no sub")
        return sub

    def _imds(self, req: BaseHTTPRequestHandler, query: dict[str, list[str]]
              ) -> tuple[str, str | None]:
        if req.headers.get("Metadata", "").lower() != "true":
            raise Refused(400, "invalid_request", "no Metadata: true header")
        for name in ("api-version", "resource", "client_id"):
            if not query.get(name, [""])[0]:
                raise Refused(400, "invalid_request", f"no {name} in the query")
        return query["client_id"][0], None
