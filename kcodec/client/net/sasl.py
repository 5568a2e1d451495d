"""Client side of the SASL mechanisms Kafka speaks, sans-I/O: bytes in, bytes out.

Each mechanism is a small state machine. ``first()`` gives the client's first message,
``step(server_bytes)`` the next one (``None`` when nothing more is to be sent) and
``done`` says whether the exchange finished successfully. The I/O driver wraps every
message in a SaslAuthenticate request (after a SaslHandshake naming the mechanism)::

    PLAIN        client: [authzid] NUL authcid NUL passwd                        (RFC 4616)
    SCRAM-SHA-*  client-first:  n,,n=USER,r=CNONCE                          (RFC 5802, 7677)
                 server-first:  r=CNONCE+SNONCE,s=SALT(base64),i=ITERATIONS
                 client-final:  c=biws,r=CNONCE+SNONCE,p=PROOF(base64)
                 server-final:  v=SERVER-SIGNATURE(base64)  |  e=ERROR
    OAUTHBEARER  client: n,, ^A auth=Bearer TOKEN ^A [key=value ^A]* ^A          (RFC 7628)
                 server: empty on success; a JSON error document, to which the client
                 answers a single ^A and the server then fails the exchange

Secrets (passwords, salted keys, tokens) never appear in reprs or error messages.
"""

from __future__ import annotations

import base64
import hmac
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kcodec.client.errors import SaslMechanismError
from kcodec.sasl.scram import HASHES, escape_name, keys, parse_attributes, salted_password

__all__ = ["SaslMechanism", "Plain", "Scram", "OAuthBearer", "OAuthToken", "TokenCache",
           "SaslMechanismError", "MECHANISMS", "make_mechanism"]

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


class SaslMechanism:
    """One client-side SASL exchange."""

    name = ""

    def __init__(self) -> None:
        self.done = False

    def first(self) -> bytes:
        raise NotImplementedError

    def step(self, challenge: bytes) -> bytes | None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class Plain(SaslMechanism):
    name = "PLAIN"

    def __init__(self, username: str, password: str, authzid: str = "") -> None:
        super().__init__()
        for what, v in (("sasl_username", username), ("sasl_password", password)):
            if not isinstance(v, str) or not v or "\0" in v:
                raise ValueError(f"{what} must be a non-empty string without NUL for SASL PLAIN")
        self.username = username
        self._password = password
        self._authzid = authzid

    def first(self) -> bytes:
        return f"{self._authzid}\0{self.username}\0{self._password}".encode()

    def step(self, challenge: bytes) -> bytes | None:
        # the broker answers an empty message on success
        self.done = True
        return None


# ---------------------------------------------------------------------- SCRAM
# (the maths and the message syntax are kcodec.sasl.scram's, shared with the broker)
def _attrs(msg: bytes, what: str) -> dict[str, str]:
    return parse_attributes(msg, what, SaslMechanismError)


class Scram(SaslMechanism):
    """SCRAM-SHA-256 / SCRAM-SHA-512 (no channel binding, as Kafka)."""

    MAX_ITERATIONS = 1 << 20   # a hostile server must not make us spin for minutes

    def __init__(self, mechanism: str, username: str, password: str,
                 nonce: str | None = None) -> None:
        super().__init__()
        if mechanism not in HASHES:
            raise ValueError(f"sasl_mechanism: {mechanism!r} is not a SCRAM mechanism")
        for what, v in (("sasl_username", username), ("sasl_password", password)):
            if not isinstance(v, str) or not v:
                raise ValueError(f"{what} must be a non-empty string for {mechanism}")
        self.name = mechanism
        self.hash = HASHES[mechanism]
        self.username = username
        self._password = password
        self._nonce = nonce or base64.b64encode(os.urandom(24)).decode().rstrip("=")
        self._client_first_bare = f"n={escape_name(username)},r={self._nonce}"
        self._server_signature: bytes | None = None
        self._state = 0

    def first(self) -> bytes:
        self._state = 1
        return ("n,," + self._client_first_bare).encode()

    def step(self, challenge: bytes) -> bytes | None:
        if self._state == 1:
            return self._final(challenge)
        if self._state == 2:
            self._verify(challenge)
            return None
        raise SaslMechanismError(f"{self.name}: unexpected server message")

    def _final(self, server_first: bytes) -> bytes:
        a = _attrs(server_first, "server-first message")
        if "e" in a:
            raise SaslMechanismError(f"{self.name}: the server refused: {a['e']}")
        try:
            nonce, salt, iterations = a["r"], base64.b64decode(a["s"], validate=True), int(a["i"])
        except (KeyError, ValueError):
            raise SaslMechanismError(f"{self.name}: malformed server-first message") from None
        if not nonce.startswith(self._nonce) or len(nonce) <= len(self._nonce):
            raise SaslMechanismError(f"{self.name}: the server's nonce does not extend ours")
        if not 1 <= iterations <= self.MAX_ITERATIONS:
            raise SaslMechanismError(f"{self.name}: iteration count {iterations} out of range")
        salted = salted_password(self.hash, self._password, salt, iterations)
        client_key, stored_key, server_key = keys(self.hash, salted)
        without_proof = f"c=biws,r={nonce}"
        auth_message = ",".join((self._client_first_bare, server_first.decode(),
                                 without_proof)).encode()
        signature = hmac.new(stored_key, auth_message, self.hash).digest()
        proof = bytes(x ^ y for x, y in zip(client_key, signature, strict=False))
        self._server_signature = hmac.new(server_key, auth_message, self.hash).digest()
        self._state = 2
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify(self, server_final: bytes) -> None:
        a = _attrs(server_final, "server-final message")
        if "e" in a:
            raise SaslMechanismError(f"{self.name}: the server refused: {a['e']}")
        try:
            v = base64.b64decode(a["v"], validate=True)
        except (KeyError, ValueError):
            raise SaslMechanismError(f"{self.name}: malformed server-final message") from None
        assert self._server_signature is not None
        if not hmac.compare_digest(v, self._server_signature):
            raise SaslMechanismError(f"{self.name}: the server's signature is wrong "
                                     "(it does not know this password)")
        self._state = 3
        self.done = True


# ---------------------------------------------------------------------- OAUTHBEARER
@dataclass
class OAuthToken:
    """A bearer token and when it expires (seconds since the epoch; None: unknown)."""

    token: str = field(repr=False)
    expires_at: float | None = None
    extensions: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, value: Any) -> OAuthToken:
        """From what a token provider returns: an ``OAuthToken``, ``(token, expires_at)``
        or a token string (a JWT's ``exp`` claim is read when there is one)."""
        if isinstance(value, OAuthToken):
            return value
        if isinstance(value, tuple) and len(value) == 2:
            return cls(str(value[0]), None if value[1] is None else float(value[1]))
        if isinstance(value, str):
            return cls(value, _jwt_exp(value))
        raise TypeError("sasl_oauth_token_provider must return a token string, "
                        f"(token, expires_at) or OAuthToken, not {type(value).__name__}")


def _jwt_exp(token: str) -> float | None:
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        pad = "=" * (-len(parts[1]) % 4)
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + pad))
        exp = claims.get("exp") if isinstance(claims, dict) else None
        return float(exp) if isinstance(exp, (int, float)) else None
    except (ValueError, UnicodeDecodeError):
        return None


TokenProvider = Callable[[], str | tuple | OAuthToken]


class TokenCache:
    """Calls the token provider, keeps the token and fetches a new one before it expires.

    A token is refreshed once ``refresh_window_factor`` of its lifetime has passed (Java's
    ``sasl.login.refresh.window.factor``, 0.8) and never used after its expiry.
    """

    def __init__(self, provider: TokenProvider, refresh_window_factor: float = 0.8,
                 clock: Callable[[], float] = time.time) -> None:
        if not callable(provider):
            raise ValueError("sasl_oauth_token_provider must be callable")
        self.provider = provider
        self.factor = refresh_window_factor
        self.clock = clock
        self._token: OAuthToken | None = None
        self._refresh_at = 0.0
        self.fetches = 0

    def __repr__(self) -> str:
        return f"<TokenCache fetches={self.fetches}>"

    def token(self) -> OAuthToken:
        now = self.clock()
        if self._token is None or now >= self._refresh_at:
            tok = OAuthToken.of(self.provider())
            self.fetches += 1
            if tok.expires_at is not None and tok.expires_at <= now:
                raise SaslMechanismError("OAUTHBEARER: the token provider returned an "
                                         "expired token")
            self._token = tok
            self._refresh_at = (float("inf") if tok.expires_at is None
                                else now + self.factor * (tok.expires_at - now))
        return self._token


class OAuthBearer(SaslMechanism):
    name = "OAUTHBEARER"

    def __init__(self, token: OAuthToken) -> None:
        super().__init__()
        self._token = token
        self._failed = False
        self.server_error: str | None = None

    def first(self) -> bytes:
        ext = "".join(f"{k}={v}\x01" for k, v in sorted(self._token.extensions.items()))
        return f"n,,\x01auth=Bearer {self._token.token}\x01{ext}\x01".encode()

    def step(self, challenge: bytes) -> bytes | None:
        if self._failed:
            return None
        if challenge:
            # an error document: acknowledge it; the server then fails the exchange
            self._failed = True
            self.server_error = challenge.decode(errors="replace")[:500]
            return b"\x01"
        self.done = True
        return None


def make_mechanism(name: str, username: str | None, password: str | None,
                   tokens: TokenCache | None) -> SaslMechanism:
    """The client mechanism for ``sasl_mechanism`` ``name``."""
    if name == "PLAIN":
        return Plain(username or "", password or "")
    if name in HASHES:
        return Scram(name, username or "", password or "")
    if name == "OAUTHBEARER":
        if tokens is None:
            raise ValueError("sasl_mechanism OAUTHBEARER needs sasl_oauth_token_provider")
        return OAuthBearer(tokens.token())
    raise ValueError(f"sasl_mechanism must be one of {', '.join(MECHANISMS)}, got {name!r}")
