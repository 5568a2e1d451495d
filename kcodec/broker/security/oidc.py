"""OAUTHBEARER tokens checked as Kafka's broker checks them with OIDC (KIP-768): signed JWTs
whose keys come from the identity provider's JWKS.

    token   = b64url(header) "." b64url(claims) "." b64url(signature)
    header  = {"alg": "RS256" | "RS384" | "RS512" | "PS256" | ... | "ES256" | ..., "kid": ...}
    claims  = {"sub": principal, "exp": epoch s, ["iat"], ["nbf"], ["aud"], ["iss"], ["scope"]}
    JWKS    = {"keys": [{"kty": "RSA", "kid", "n", "e"} | {"kty": "EC", "kid", "crv", "x", "y"}]}

:class:`JwksValidator` is a token validator for :class:`~kcodec.broker.security.OAuthBearerServer`,
configured by Kafka's broker config names (:data:`OIDC_CONFIGS`, also in the broker config
reference):

    sasl.oauthbearer.jwks.endpoint.url            the JWKS, http(s):// or file://
    sasl.oauthbearer.jwks.endpoint.refresh.ms     how long a fetched JWKS is used
    sasl.oauthbearer.jwks.endpoint.retry.backoff.ms / .retry.backoff.max.ms
                                                  the least and the most time between
                                                  fetches when a token names an unknown kid
                                                  or a fetch failed (doubling in between)
    sasl.oauthbearer.clock.skew.seconds           the leeway of exp, nbf and iat
    sasl.oauthbearer.expected.audience            one of them must be in aud (if set)
    sasl.oauthbearer.expected.issuer              iss must be this (if set)
    sasl.oauthbearer.sub.claim.name               the claim the principal is taken from
    sasl.oauthbearer.scope.claim.name             the claim the scopes are read from

exp and the subject claim are required, as in Kafka. A token is refused with a
``ValueError`` saying why; the OAUTHBEARER exchange logs it and tells the client only that
the token is not valid. The signatures are checked with the ``cryptography`` package,
imported when a validator is made: without it the validator refuses to start, naming it.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

from kcodec.broker.config.types import ConfigError
from kcodec.broker.security.sasl import TokenInfo

__all__ = ["JwksValidator", "OIDC_CONFIGS", "JWKS_URL"]

JWKS_URL = "sasl.oauthbearer.jwks.endpoint.url"
#: Kafka's OIDC validation configs: name -> (type, Kafka's default)
OIDC_CONFIGS: dict[str, tuple[str, Any]] = {
    JWKS_URL: ("STRING", None),
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": ("LONG", 3600000),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": ("LONG", 100),
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": ("LONG", 10000),
    "sasl.oauthbearer.clock.skew.seconds": ("INT", 30),
    "sasl.oauthbearer.expected.audience": ("LIST", None),
    "sasl.oauthbearer.expected.issuer": ("STRING", None),
    "sasl.oauthbearer.sub.claim.name": ("STRING", "sub"),
    "sasl.oauthbearer.scope.claim.name": ("STRING", "scope"),
}
_HASHES = {"256": "SHA256", "384": "SHA384", "512": "SHA512"}
_CURVES = {"P-256": ("SECP256R1", 32), "P-384": ("SECP384R1", 48), "P-521": ("SECP521R1", 66)}
_FETCH_TIMEOUT_S = 10.0


def _crypto() -> SimpleNamespace:
    try:
        from cryptography import exceptions
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils
    except ImportError:
        raise ConfigError(f"{JWKS_URL} needs the cryptography package to check token "
                          "signatures: pip install cryptography") from None
    return SimpleNamespace(exceptions=exceptions, hashes=hashes, ec=ec, padding=padding,
                           rsa=rsa, utils=utils)


def _b64(part: str, what: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        raise ValueError(f"the token's {what} is not base64url") from None


def _b64_int(v: Any, what: str) -> int:
    if not isinstance(v, str):
        raise ValueError(f"JWKS key: {what} is not a string")
    return int.from_bytes(_b64(v, what), "big")


def _json_object(raw: bytes, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise ValueError(f"{what} is not JSON") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{what} is not a JSON object")
    return obj


class JwksValidator:
    """``validator(token, extensions) -> TokenInfo`` checking signed JWTs against the JWKS
    at ``config[JWKS_URL]`` (see the module's text for the configs). Thread-safe: one
    validator serves every listener and node."""

    def __init__(self, config: Mapping[str, Any], *,
                 clock: Callable[[], float] = time.time,
                 fetch: Callable[[str], bytes] | None = None) -> None:
        from kcodec.broker.config.types import ConfigDef

        self._c = _crypto()
        values: dict[str, Any] = {}
        for name, (type_, dflt) in OIDC_CONFIGS.items():
            d = ConfigDef(name, type_, dflt, "")
            values[name] = d.parse(config[name]) if config.get(name) is not None else dflt
        url = values[JWKS_URL]
        if not url:
            raise ConfigError(f"{JWKS_URL} is not set: OIDC validation needs the JWKS of the "
                              "identity provider")
        if not str(url).startswith(("http://", "https://", "file:")):
            raise ConfigError(f"Invalid value {url} for configuration {JWKS_URL}: give an "
                              "http://, https:// or file: URL")
        self.url: str = url
        self.refresh_s = values["sasl.oauthbearer.jwks.endpoint.refresh.ms"] / 1000
        self.backoff_s = values["sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"] / 1000
        self.backoff_max_s = values["sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"] / 1000
        self.skew_s: int = values["sasl.oauthbearer.clock.skew.seconds"]
        self.audience: list[str] = list(values["sasl.oauthbearer.expected.audience"] or [])
        self.issuer: str | None = values["sasl.oauthbearer.expected.issuer"] or None
        self.sub_claim: str = values["sasl.oauthbearer.sub.claim.name"] or "sub"
        self.scope_claim: str = values["sasl.oauthbearer.scope.claim.name"] or "scope"
        self._clock = clock
        self._fetch = fetch or self._http_fetch
        self._lock = threading.Lock()
        self._keys: dict[str | None, tuple[str, Any]] = {}   # kid -> (kty, public key)
        self._fetched_at: float | None = None     # when the keys were fetched
        self._next_try = 0.0                      # no fetch before this (backoff)
        self._wait = self.backoff_s
        self._last_error: str | None = None

    # ------------------------------------------------------------------ the JWKS
    @staticmethod
    def _http_fetch(url: str) -> bytes:
        req = urllib.request.Request(url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(req, timeout=_FETCH_TIMEOUT_S) as resp:  # noqa: S310
            return bytes(resp.read())

    def _refresh(self, now: float) -> None:
        """Fetch the JWKS now, or say why the keys in hand are all there is."""
        if now < self._next_try:
            return
        try:
            raw = self._fetch(self.url)
            keys = self._parse_jwks(raw)
        except (OSError, ValueError, urllib.error.URLError) as exc:
            self._last_error = f"cannot fetch the JWKS from {self.url}: {exc}"
            self._next_try = now + self._wait
            self._wait = min(self._wait * 2, self.backoff_max_s)
            return
        self._keys = keys
        self._fetched_at = now
        self._last_error = None
        self._next_try = now + self.backoff_s
        self._wait = self.backoff_s

    def _parse_jwks(self, raw: bytes) -> dict[str | None, tuple[str, Any]]:
        doc = _json_object(raw, "the JWKS")
        items = doc.get("keys")
        if not isinstance(items, list):
            raise ValueError("the JWKS has no keys list")
        keys: dict[str | None, tuple[str, Any]] = {}
        for k in items:
            if not isinstance(k, dict) or k.get("use", "sig") != "sig":
                continue
            kty = k.get("kty")
            try:
                if kty == "RSA":
                    pub = self._c.rsa.RSAPublicNumbers(_b64_int(k.get("e"), "e"),
                                                       _b64_int(k.get("n"), "n")).public_key()
                elif kty == "EC" and k.get("crv") in _CURVES:
                    curve = getattr(self._c.ec, _CURVES[k["crv"]][0])()
                    pub = self._c.ec.EllipticCurvePublicNumbers(
                        _b64_int(k.get("x"), "x"), _b64_int(k.get("y"), "y"),
                        curve).public_key()
                else:
                    continue      # a key type this broker does not check: not usable
            except ValueError:
                continue          # a malformed key: the others stay usable
            keys[k.get("kid") if isinstance(k.get("kid"), str) else None] = (kty, pub)
        return keys

    def _key(self, kid: str | None) -> tuple[str, Any]:
        now = self._clock()
        with self._lock:
            stale = self._fetched_at is None or now - self._fetched_at >= self.refresh_s
            if stale or kid not in self._keys:
                self._refresh(now)
            if kid in self._keys:
                return self._keys[kid]
            if self._fetched_at is None:
                raise ValueError(self._last_error or f"no JWKS fetched from {self.url} yet")
            raise ValueError(f"no key with kid {kid!r} in the JWKS from {self.url}")

    # ------------------------------------------------------------------ a token
    def __call__(self, token: str, extensions: Mapping[str, str] | None = None) -> TokenInfo:
        parts = token.split(".")
        if len(parts) != 3:
            raise ValueError(f"the token is not a signed JWT (it has {len(parts)} parts, "
                             "not 3)")
        header = _json_object(_b64(parts[0], "header"), "the token's header")
        claims = _json_object(_b64(parts[1], "claims"), "the token's claims")
        signature = _b64(parts[2], "signature")
        alg = header.get("alg")
        if not isinstance(alg, str) or alg[:2] not in ("RS", "PS", "ES") \
                or alg[2:] not in _HASHES:
            raise ValueError(f"the token's alg {alg!r} is not one this broker checks "
                             "(RS256/384/512, PS256/384/512, ES256/384/512)")
        kid = header.get("kid")
        kty, key = self._key(kid if isinstance(kid, str) else None)
        self._verify(alg, kty, key, (parts[0] + "." + parts[1]).encode("ascii"), signature)
        return self._check_claims(claims)

    def _verify(self, alg: str, kty: str, key: Any, signed: bytes, signature: bytes) -> None:
        c = self._c
        hash_ = getattr(c.hashes, _HASHES[alg[2:]])()
        if (kty == "EC") != (alg[:2] == "ES"):
            raise ValueError(f"the token's alg {alg} does not fit the JWKS key ({kty})")
        try:
            if alg.startswith("RS"):
                key.verify(signature, signed, c.padding.PKCS1v15(), hash_)
            elif alg.startswith("PS"):
                key.verify(signature, signed, c.padding.PSS(c.padding.MGF1(hash_),
                                                            hash_.digest_size), hash_)
            else:
                half = len(signature) // 2
                if len(signature) % 2 or half == 0:
                    raise c.exceptions.InvalidSignature()
                der = c.utils.encode_dss_signature(int.from_bytes(signature[:half], "big"),
                                                   int.from_bytes(signature[half:], "big"))
                key.verify(der, signed, c.ec.ECDSA(hash_))
        except c.exceptions.InvalidSignature:
            raise ValueError("the token's signature does not verify with the JWKS key") \
                from None

    def _check_claims(self, claims: Mapping[str, Any]) -> TokenInfo:
        now = self._clock()
        exp = claims.get("exp")
        if not isinstance(exp, (int, float)) or isinstance(exp, bool):
            raise ValueError("the token has no exp claim (a number of seconds)")
        if exp + self.skew_s <= now:
            raise ValueError(f"the token expired at {exp} (now {now:.0f}, clock skew "
                             f"{self.skew_s}s)")
        for name in ("nbf", "iat"):
            v = claims.get(name)
            if v is None:
                continue
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise ValueError(f"the token's {name} claim is not a number")
            if v - self.skew_s > now:
                raise ValueError(f"the token's {name} {v} is in the future (now {now:.0f}, "
                                 f"clock skew {self.skew_s}s)")
        if self.issuer is not None and claims.get("iss") != self.issuer:
            raise ValueError(f"the token's issuer {claims.get('iss')!r} is not the expected "
                             f"{self.issuer!r}")
        if self.audience:
            aud = claims.get("aud")
            auds = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
            if not set(self.audience) & {a for a in auds if isinstance(a, str)}:
                raise ValueError(f"the token's audience {aud!r} has none of the expected "
                                 f"{self.audience}")
        sub = claims.get(self.sub_claim)
        if not isinstance(sub, str) or not sub.strip():
            raise ValueError(f"the token has no {self.sub_claim} claim (a non-empty string) "
                             "to take the principal from")
        scope = claims.get(self.scope_claim)
        scopes = tuple(scope.split()) if isinstance(scope, str) else \
            tuple(s for s in scope if isinstance(s, str)) if isinstance(scope, list) else ()
        return TokenInfo(principal=sub, expires_at=float(exp), scope=scopes)
