"""TLS and SASL for the client's connections (Java's config names in snake_case).

    security_protocol   PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    ssl_cafile ssl_certfile ssl_keyfile ssl_password      PEM files; no cafile: system CAs
    ssl_endpoint_identification_algorithm                 "https" (default: the broker's
                                                          name must match its certificate)
                                                          or "" / None to skip that check
    ssl_context                                           an ``ssl.SSLContext`` (wins)
    sasl_mechanism      PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512 | OAUTHBEARER
    sasl_username sasl_password                           PLAIN and SCRAM
    sasl_oauth_token_provider   callable -> token str (a JWT's exp is read),
                                (token, expires_at) or ``OAuthToken``; called again once
                                ``sasl_login_refresh_window_factor`` of the lifetime passed

``Security`` is built once per client from its config (one SSL context, one token cache)
and authenticates every new connection right after ApiVersions: SaslHandshake v1, then
SaslAuthenticate rounds. When the broker gives a session lifetime (KIP-368) the connection
re-authenticates before it ends, at a random point between 85% and 95% of it, as Java.

Failures raise ``AuthenticationError`` subclasses at once (never retried): a wrong
password, an expired or refused token, an untrusted certificate or a wrong host name each
say so. Secrets never appear in reprs, logs or error messages.
"""

from __future__ import annotations

import random
import ssl
import time
from typing import TYPE_CHECKING, Protocol, TypeVar

from kcodec.client.errors import SaslAuthenticationError, SslAuthenticationError
from kcodec.client.net import requests
from kcodec.client.net.sasl import MECHANISMS, SaslMechanismError, TokenCache, make_mechanism
from kcodec.protocol import ApiKey, ErrorCode
from kcodec.protocol import Request as RequestBody
from kcodec.protocol import Response as ResponseBody

# The re-authentication jitter's own generator (not the application's global ``random``).
_RNG = random.Random()

if TYPE_CHECKING:
    from kcodec.client.config import ClientConfig
    from kcodec.client.net.core import Response

__all__ = ["Security", "PROTOCOLS", "validate_security", "ssl_context_for", "tls_error"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def validate_security(cfg: ClientConfig) -> None:
    """Check the security settings of a config (called from its ``__post_init__``)."""
    proto = cfg.security_protocol
    if not isinstance(proto, str) or proto.upper() not in PROTOCOLS:
        raise ValueError(f"security_protocol must be one of {', '.join(PROTOCOLS)}, got {proto!r}")
    cfg.security_protocol = proto.upper()
    for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "sasl_username"):
        v = getattr(cfg, name)
        if v is not None and not isinstance(v, str):
            raise ValueError(f"{name} must be a string or None, got {type(v).__name__}")
    for name in ("ssl_password", "sasl_password"):
        v = getattr(cfg, name)
        if v is not None and not isinstance(v, str):
            raise ValueError(f"{name} must be a string or None (value not shown)")
    alg = cfg.ssl_endpoint_identification_algorithm
    if alg not in (None, "", "https", "HTTPS"):
        raise ValueError("ssl_endpoint_identification_algorithm must be 'https' or '' "
                         f"(no host name check), got {alg!r}")
    if cfg.ssl_context is not None and not isinstance(cfg.ssl_context, ssl.SSLContext):
        raise ValueError("ssl_context must be an ssl.SSLContext")
    f = cfg.sasl_login_refresh_window_factor
    if not isinstance(f, (int, float)) or isinstance(f, bool) or not 0.5 <= f <= 1.0:
        raise ValueError(f"sasl_login_refresh_window_factor must be in [0.5, 1.0], got {f!r}")
    mech = cfg.sasl_mechanism
    if not isinstance(mech, str) or mech.upper() not in MECHANISMS:
        raise ValueError(f"sasl_mechanism must be one of {', '.join(MECHANISMS)}, got {mech!r}")
    cfg.sasl_mechanism = mech = mech.upper()
    if cfg.security_protocol.startswith("SASL_"):
        if mech == "OAUTHBEARER":
            if not callable(cfg.sasl_oauth_token_provider):
                raise ValueError("sasl_mechanism OAUTHBEARER needs sasl_oauth_token_provider "
                                 "(a callable returning a token)")
        elif not cfg.sasl_username or not cfg.sasl_password:
            raise ValueError(f"sasl_mechanism {mech} needs sasl_username and sasl_password")


def ssl_context_for(cfg: ClientConfig) -> ssl.SSLContext:
    """The client's TLS context: ``ssl_context`` as given, or one built from the files."""
    if cfg.ssl_context is not None:
        return cfg.ssl_context
    try:
        ctx = ssl.create_default_context(cafile=cfg.ssl_cafile)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"ssl_cafile: cannot load {cfg.ssl_cafile!r}: {_reason(exc)}") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = bool(cfg.ssl_endpoint_identification_algorithm)
    if cfg.ssl_certfile:
        try:
            ctx.load_cert_chain(cfg.ssl_certfile, cfg.ssl_keyfile, password=cfg.ssl_password)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"ssl_certfile/ssl_keyfile: cannot load {cfg.ssl_certfile!r}: "
                             f"{_reason(exc)}") from None
    return ctx


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or getattr(exc, "reason", None) or exc.args[-1])


def tls_error(host: str, port: int, exc: ssl.SSLError) -> SslAuthenticationError:
    """A clear error for a failed TLS handshake: untrusted certificate, wrong host name..."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        why = exc.verify_message or exc.reason or "certificate verification failed"
        if "hostname" in why.lower() or "ip address mismatch" in why.lower():
            why = f"the certificate does not match host name {host!r} ({why})"
        else:
            why = f"the broker's certificate is not trusted ({why}); check ssl_cafile"
    else:
        why = exc.reason or str(exc)
    return SslAuthenticationError(f"TLS handshake with {host}:{port} failed: {why}")


R = TypeVar("R", bound=ResponseBody)


class Send(Protocol):
    """How a connection sends one SASL request at ``version`` and awaits its typed answer
    (the API key is the request class's)."""

    async def __call__(self, req: RequestBody[R], version: int) -> Response[R]: ...


class Security:
    """The security settings of one client: SSL context and SASL credentials."""

    def __init__(self, cfg: ClientConfig) -> None:
        self.protocol = cfg.security_protocol
        self.use_tls = self.protocol in ("SSL", "SASL_SSL")
        self.use_sasl = self.protocol.startswith("SASL_")
        self.ssl_context = ssl_context_for(cfg) if self.use_tls else None
        self.mechanism = cfg.sasl_mechanism
        self.username = cfg.sasl_username
        self._password = cfg.sasl_password
        self.tokens = (TokenCache(cfg.sasl_oauth_token_provider,
                                  cfg.sasl_login_refresh_window_factor)
                       if self.use_sasl and self.mechanism == "OAUTHBEARER" else None)

    def __repr__(self) -> str:
        who = f" as {self.username!r}" if self.username and self.mechanism != "OAUTHBEARER" else ""
        return f"<Security {self.protocol} {self.mechanism if self.use_sasl else ''}{who}>"

    @classmethod
    def of(cls, cfg: ClientConfig) -> Security | None:
        """None for PLAINTEXT (nothing to do)."""
        return None if cfg.security_protocol == "PLAINTEXT" else cls(cfg)

    async def authenticate(self, send: Send, versions: dict[int, tuple[int, int]] | None,
                           where: str) -> float | None:
        """Run the SASL exchange through ``send(req, version)``.

        Returns when the session must be re-authenticated (monotonic seconds) or None.
        """
        if versions is not None and (ApiKey.SASL_HANDSHAKE not in versions
                                     or ApiKey.SASL_AUTHENTICATE not in versions):
            raise SaslAuthenticationError(
                f"{where} does not offer SASL (no SaslHandshake/SaslAuthenticate): is it a "
                f"SASL listener? security_protocol is {self.protocol}")
        auth_v = min(2, versions[ApiKey.SASL_AUTHENTICATE][1]) if versions is not None else 1
        try:
            mech = make_mechanism(self.mechanism, self.username, self._password, self.tokens)
        except SaslMechanismError as exc:
            raise SaslAuthenticationError(f"{where}: {exc}") from None
        hs = (await send(requests.sasl_handshake(self.mechanism), 1)).body
        if hs.error_code:
            offered = ", ".join(hs.mechanisms or ()) or "none"
            if hs.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
                raise SaslAuthenticationError(
                    f"{where} does not enable SASL mechanism {self.mechanism} "
                    f"(it offers: {offered})")
            raise SaslAuthenticationError(
                f"{where}: SaslHandshake failed with error {hs.error_code}")
        started = time.monotonic()
        out: bytes | None = mech.first()
        lifetime = 0
        while out is not None:
            body = (await send(requests.sasl_authenticate(out), auth_v)).body
            if body.error_code:
                detail = body.error_message or f"error {body.error_code}"
                server_error = getattr(mech, "server_error", None)  # OAUTHBEARER: the JSON
                if server_error:
                    detail += f" ({server_error})"
                who = (f" as {self.username!r}" if self.mechanism != "OAUTHBEARER"
                       else "")
                raise SaslAuthenticationError(
                    f"SASL {self.mechanism} authentication{who} at {where} failed: {detail}")
            lifetime = getattr(body, "session_lifetime_ms", 0) or 0
            try:
                out = mech.step(body.auth_bytes or b"")
            except SaslMechanismError as exc:
                raise SaslAuthenticationError(f"{where}: {exc}") from None
        if not mech.done:
            raise SaslAuthenticationError(
                f"SASL {self.mechanism} authentication at {where} did not complete")
        if lifetime > 0:
            return started + lifetime / 1000 * _RNG.uniform(0.85, 0.95)
        return None
