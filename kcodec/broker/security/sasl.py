"""Server side of Kafka's SASL mechanisms, sans-I/O: the broker feeds each SaslAuthenticate
request's ``auth_bytes`` to ``step`` and sends back what it returns.

    PLAIN        one client message ``[authzid] NUL user NUL password``; checked against a
                 callable, a user -> password mapping (compared in constant time) or, to keep
                 no password, salted credentials (:func:`plain_check`: the password is
                 salted and hashed as SCRAM does and compared with the StoredKey)
    SCRAM-SHA-*  client-first -> server-first (salt, iterations, nonce) -> client-final
                 (proof) -> server-final (signature); the store keeps only salted
                 credentials (salt, iterations, StoredKey, ServerKey), never passwords.
                 An unknown user gets a fake credential derived from a secret of the
                 broker (as RFC 5802 section 5.1 advises), with the salt length and
                 iteration count of the real ones, so the answer does not tell which
                 names exist; the exchange then fails at the proof, like a wrong password
    OAUTHBEARER  one client message with ``auth=Bearer TOKEN``; a pluggable validator
                 returns the principal and the token's expiry (or raises); a refused token
                 gets an RFC 7628 error document, the client's ^A, then the failure; the
                 validator's exception text is logged by the broker, never sent

A failed exchange raises ``SaslAuthenticationFailed`` whose message is safe to send to the
client (it names the mechanism and the user, never a secret).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kcodec.errors import KcodecError
from kcodec.sasl.scram import HASHES, keys, parse_attributes, salted_password

__all__ = ["SaslAuthenticationFailed", "ServerMechanism", "PlainServer", "ScramCredential",
           "ScramServer", "OAuthBearerServer", "TokenInfo", "make_scram_credential",
           "fake_scram_credential", "scram_salt", "plain_check"]

# the secret fake SCRAM credentials come from when a ScramServer is given none: random for
# this process (a broker that must answer the same across restarts passes its own, see
# kcodec.broker.security.secret)
_PROCESS_SECRET = os.urandom(32)


class SaslAuthenticationFailed(KcodecError):
    """The client failed to authenticate; the text is safe to send back to it."""


class ServerMechanism:
    """One server-side exchange: ``step(client_bytes) -> server_bytes``; ``principal`` and
    ``session_expires_at`` (epoch seconds or None) once ``done``."""

    name = ""

    def __init__(self) -> None:
        self.done = False
        self.user: str | None = None        # the user name the client claimed, once read
        self.principal: str | None = None
        self.session_expires_at: float | None = None

    def step(self, data: bytes) -> bytes:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} principal={self.principal!r}>"


# ---------------------------------------------------------------------- PLAIN
PasswordCheck = Callable[[str, str], bool]


class PlainServer(ServerMechanism):
    name = "PLAIN"

    def __init__(self, users: Mapping[str, str] | PasswordCheck) -> None:
        super().__init__()
        self._users = users

    def _check(self, user: str, password: str) -> bool:
        if callable(self._users):
            return bool(self._users(user, password))
        expected = self._users.get(user)
        # compare even for unknown users so timing does not tell which users exist
        ok = hmac.compare_digest((expected or "\0").encode(), password.encode())
        return expected is not None and ok

    def step(self, data: bytes) -> bytes:
        if self.done:
            raise SaslAuthenticationFailed("PLAIN: the exchange is already complete")
        try:
            parts = bytes(data).decode().split("\0")
        except UnicodeDecodeError:
            raise SaslAuthenticationFailed("PLAIN: the message is not UTF-8") from None
        if len(parts) != 3 or not parts[1] or not parts[2]:
            raise SaslAuthenticationFailed("PLAIN: malformed message (expected "
                                           "authzid NUL user NUL password)")
        authzid, user, password = parts
        self.user = user
        if authzid and authzid != user:
            raise SaslAuthenticationFailed(f"PLAIN: user {user!r} may not act as {authzid!r}")
        if not self._check(user, password):
            raise SaslAuthenticationFailed(
                f"Authentication failed: invalid username or password for user {user!r}")
        self.principal = user
        self.done = True
        return b""


# ---------------------------------------------------------------------- SCRAM
@dataclass
class ScramCredential:
    """A user's salted SCRAM credential (what Kafka stores; the password is not kept)."""

    salt: bytes = field(repr=False)
    iterations: int
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)


def make_scram_credential(mechanism: str, password: str, iterations: int = 4096,
                          salt: bytes | None = None) -> ScramCredential:
    """Salt and hash ``password`` for ``mechanism`` (SCRAM-SHA-256 or SCRAM-SHA-512)."""
    if mechanism not in HASHES:
        raise ValueError(f"{mechanism!r} is not a SCRAM mechanism")
    if iterations < 4096:
        raise ValueError("SCRAM iterations must be at least 4096")
    salt = salt if salt is not None else os.urandom(32)
    salted = salted_password(HASHES[mechanism], password, salt, iterations)
    _, stored, server = keys(HASHES[mechanism], salted)
    return ScramCredential(salt, iterations, stored, server)


def _derive(secret: bytes, label: str, mechanism: str, user: str, length: int) -> bytes:
    """``length`` bytes only the holder of ``secret`` can compute, for (label, mechanism,
    user): HMAC-SHA-256 in counter mode."""
    info = "\0".join((label, mechanism, user)).encode()
    out = b""
    counter = 0
    while len(out) < length:
        counter += 1
        out += hmac.new(secret, info + counter.to_bytes(4, "big"), "sha256").digest()
    return out[:length]


def scram_salt(secret: bytes, mechanism: str, user: str, length: int = 32) -> bytes:
    """A salt for ``user``'s real credential made from a broker secret: stable while the
    secret is, like the fake salts of unknown users, so that restarts change (or keep) the
    salts of real and unknown names alike."""
    return _derive(secret, "salt", mechanism, user, length)


def fake_scram_credential(mechanism: str, user: str, secret: bytes, iterations: int = 4096,
                          salt_length: int = 32) -> ScramCredential:
    """The credential an unknown ``user`` is answered with: a salt and keys derived from
    ``secret`` (nobody without it can tell them from a real user's), never usable to log in."""
    if mechanism not in HASHES:
        raise ValueError(f"{mechanism!r} is not a SCRAM mechanism")
    size = hashlib.new(HASHES[mechanism]).digest_size
    return ScramCredential(scram_salt(secret, mechanism, user, salt_length), iterations,
                           _derive(secret, "stored-key", mechanism, user, size),
                           _derive(secret, "server-key", mechanism, user, size))


CredentialLookup = Callable[[str], "ScramCredential | None"]


def _unescape_name(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise SaslAuthenticationFailed("SCRAM: malformed user name")
    return name.replace("=2C", ",").replace("=3D", "=")


def _typical(credentials: Mapping[str, ScramCredential]) -> tuple[int, int]:
    """(iterations, salt length) most real credentials have, for the fake ones."""
    if not credentials:
        return 4096, 32
    iters = Counter(c.iterations for c in credentials.values())
    lengths = Counter(len(c.salt) for c in credentials.values())
    return (max(iters, key=lambda k: (iters[k], k)),
            max(lengths, key=lambda k: (lengths[k], k)))


class ScramServer(ServerMechanism):
    """``credentials``: user -> ScramCredential, or a lookup function. An unknown user is
    answered with :func:`fake_scram_credential` from ``secret`` (default: random for the
    process), with ``fake_iterations`` and ``fake_salt_length`` (default: what most of the
    mapping's credentials have, else 4096 and 32)."""

    def __init__(self, mechanism: str,
                 credentials: Mapping[str, ScramCredential] | CredentialLookup,
                 nonce: str | None = None, *, secret: bytes | None = None,
                 fake_iterations: int | None = None,
                 fake_salt_length: int | None = None) -> None:
        super().__init__()
        if mechanism not in HASHES:
            raise ValueError(f"{mechanism!r} is not a SCRAM mechanism")
        self.name = mechanism
        self.hash = HASHES[mechanism]
        self._lookup: CredentialLookup = (credentials if callable(credentials)
                                          else credentials.get)
        #: the credentials it was given as a mapping (None: a lookup function)
        self.credentials: dict[str, ScramCredential] | None = (
            None if callable(credentials) else dict(credentials))
        iterations, salt_length = _typical({} if callable(credentials) else credentials)
        self._fake_iterations = fake_iterations or iterations
        self._fake_salt_length = fake_salt_length or salt_length
        self._secret = secret if secret is not None else _PROCESS_SECRET
        self._server_nonce = nonce or base64.b64encode(os.urandom(24)).decode().rstrip("=")
        self._state = 0
        self._cred: ScramCredential | None = None
        self._fake = False
        self._user = ""
        self._first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def use_lookup(self, lookup: CredentialLookup) -> None:
        """Look users up with ``lookup`` instead (the broker's credential store, which
        AlterUserScramCredentials changes at run time); before the exchange starts."""
        self._lookup = lookup

    def step(self, data: bytes) -> bytes:
        if self._state == 0:
            return self._first(bytes(data))
        if self._state == 1:
            return self._final(bytes(data))
        raise SaslAuthenticationFailed(f"{self.name}: the exchange is already complete")

    def _first(self, msg: bytes) -> bytes:
        try:
            text = msg.decode()
        except UnicodeDecodeError:
            raise SaslAuthenticationFailed(f"{self.name}: client-first message is not UTF-8") from None
        gs2, sep, bare = text.partition(",")
        authzid, sep2, bare = bare.partition(",")
        if not sep or not sep2 or gs2 not in ("n", "y"):
            raise SaslAuthenticationFailed(f"{self.name}: malformed client-first message "
                                           "(channel binding is not supported)")
        a = parse_attributes(bare.encode(), "client-first message", SaslAuthenticationFailed)
        if "n" not in a or "r" not in a or not a["r"]:
            raise SaslAuthenticationFailed(f"{self.name}: client-first message lacks n= or r=")
        self._user = self.user = _unescape_name(a["n"])
        # a Kafka extension (delegation tokens) may follow; unknown extensions are ignored
        # the fake credential is made for every name, known or not, so that both take the
        # same time; an unknown name goes on with it and fails at the same step, after the
        # same work, as a wrong password
        fake = fake_scram_credential(self.name, self._user, self._secret,
                                     self._fake_iterations, self._fake_salt_length)
        cred = self._lookup(self._user)
        if cred is None:
            cred = fake
            self._fake = True
        self._cred = cred
        self._first_bare = bare
        self._nonce = a["r"] + self._server_nonce
        self._server_first = (f"r={self._nonce},s={base64.b64encode(cred.salt).decode()},"
                              f"i={cred.iterations}")
        self._state = 1
        return self._server_first.encode()

    def _final(self, msg: bytes) -> bytes:
        a = parse_attributes(msg, "client-final message", SaslAuthenticationFailed)
        text = msg.decode()      # UTF-8: parse_attributes checked it
        if a.get("c") != "biws" or a.get("r") != self._nonce or "p" not in a:
            raise SaslAuthenticationFailed(f"{self.name}: malformed client-final message")
        try:
            proof = base64.b64decode(a["p"], validate=True)
        except ValueError:
            raise SaslAuthenticationFailed(f"{self.name}: malformed client proof") from None
        cut = text.rfind(",p=")
        if cut < 0:      # the proof must come last (RFC 5802)
            raise SaslAuthenticationFailed(f"{self.name}: malformed client-final message")
        without_proof = text[:cut]
        auth_message = ",".join((self._first_bare, self._server_first, without_proof)).encode()
        cred = self._cred
        if cred is None:
            raise SaslAuthenticationFailed(f"{self.name}: client-final before client-first")
        signature = hmac.new(cred.stored_key or b"\0", auth_message, self.hash).digest()
        if len(proof) != len(signature):
            raise SaslAuthenticationFailed(
                f"Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {self.name}")
        client_key = bytes(x ^ y for x, y in zip(proof, signature, strict=False))
        matches = hmac.compare_digest(hashlib.new(self.hash, client_key).digest(),
                                      cred.stored_key)
        if self._fake or not cred.stored_key or not matches:
            raise SaslAuthenticationFailed(
                f"Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {self.name}")
        self.principal = self._user
        self.done = True
        self._state = 2
        server_sig = hmac.new(cred.server_key, auth_message, self.hash).digest()
        return f"v={base64.b64encode(server_sig).decode()}".encode()


def plain_check(credentials: Mapping[str, ScramCredential] | CredentialLookup,
                mechanism: str = "SCRAM-SHA-512", *,
                secret: bytes | None = None) -> PasswordCheck:
    """A PLAIN password check against salted credentials of ``mechanism`` (as made by
    :func:`make_scram_credential`), so that no password is kept: the given password is
    salted and hashed with the user's salt and iterations and its StoredKey compared in
    constant time. An unknown user is checked against a fake credential from ``secret``
    (default: random for the process): the same work, the same refusal."""
    if mechanism not in HASHES:
        raise ValueError(f"{mechanism!r} is not a SCRAM mechanism")
    hash_name = HASHES[mechanism]
    lookup: CredentialLookup = credentials if callable(credentials) else credentials.get
    iterations, salt_length = _typical({} if callable(credentials) else credentials)
    key = secret if secret is not None else _PROCESS_SECRET

    def check(user: str, password: str) -> bool:
        fake = fake_scram_credential(mechanism, user, key, iterations, salt_length)
        cred = lookup(user)
        known = cred is not None
        c = cred if cred is not None else fake
        _, stored, _ = keys(hash_name, salted_password(hash_name, password, c.salt,
                                                       c.iterations))
        return hmac.compare_digest(stored, c.stored_key) and known
    return check


# ---------------------------------------------------------------------- OAUTHBEARER
@dataclass
class TokenInfo:
    """What a token validator returns for a good token."""

    principal: str
    expires_at: float | None = None     # epoch seconds
    scope: tuple[str, ...] = ()


TokenValidator = Callable[[str, "dict[str, str]"], TokenInfo]


class OAuthBearerServer(ServerMechanism):
    """``validator(token, extensions) -> TokenInfo`` (raise ``ValueError`` for a bad token).

    An expired token (``expires_at`` in the past) is refused here whatever the validator
    says; the session lasts no longer than the token (KIP-368 re-authentication).
    """

    name = "OAUTHBEARER"

    def __init__(self, validator: TokenValidator, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self._validate = validator
        self._clock = clock
        self._failure: str | None = None
        self.detail: str | None = None      # why, for the broker's log (never sent)

    def step(self, data: bytes) -> bytes:
        if self._failure is not None:
            # the client acknowledged the error document: fail now
            raise SaslAuthenticationFailed(self._failure)
        if self.done:
            raise SaslAuthenticationFailed("OAUTHBEARER: the exchange is already complete")
        try:
            text = bytes(data).decode()
        except UnicodeDecodeError:
            raise SaslAuthenticationFailed("OAUTHBEARER: the message is not UTF-8") from None
        gs2, sep, rest = text.partition("\x01")
        if not sep or not gs2.startswith(("n,", "y,")) or not rest.endswith("\x01\x01"):
            raise SaslAuthenticationFailed("OAUTHBEARER: malformed client message")
        kv: dict[str, str] = {}
        for item in rest[:-2].split("\x01"):
            k, eq, v = item.partition("=")
            if not eq:
                raise SaslAuthenticationFailed("OAUTHBEARER: malformed key/value pair")
            kv[k] = v
        auth = kv.pop("auth", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise SaslAuthenticationFailed("OAUTHBEARER: no bearer token in the message")
        try:
            info = self._validate(token, kv)
        except Exception as exc:
            # the validator's reason goes to the broker's log only: its text may say how
            # tokens are checked (keys, issuers, audiences), the client learns nothing
            self.detail = f"the validator refused the token: {str(exc) or type(exc).__name__}"
            return self._refuse("invalid_token", "the token is not valid")
        if info.expires_at is not None and info.expires_at <= self._clock():
            return self._refuse("invalid_token", "the token has expired")
        self.principal = info.principal
        self.session_expires_at = info.expires_at
        self.done = True
        return b""

    def _refuse(self, status: str, reason: str) -> bytes:
        self._failure = f"OAUTHBEARER: token refused: {reason}"
        self.detail = self.detail or reason
        return json.dumps({"status": status}).encode()

