"""Per-connection SASL state for a broker listener, sans-I/O.

The network layer asks ``allowed(api_key)`` before handling a request: until the client
has authenticated only ApiVersions (18), SaslHandshake (17) and SaslAuthenticate (36) are
allowed. ``handshake(body)`` and ``authenticate(body, version)`` return the response
fields as dicts; ``close_after`` tells the network layer to close the connection after
sending the response (a failed authentication, as Kafka: SASL_AUTHENTICATION_FAILED).

States::

    HANDSHAKE --SaslHandshake(ok)--> AUTHENTICATE --SaslAuthenticate*--> AUTHENTICATED
        ^                                                                     |
        +--------------- SaslHandshake again (KIP-368 re-authentication) ------+

Session lifetime (KIP-368): ``connections_max_reauth_ms`` (0: unlimited) capped by the
expiry of an OAUTHBEARER token; it is sent in ``session_lifetime_ms`` and ``expired()``
says when the connection must re-authenticate before anything else is served.
A re-authentication must keep the same principal and mechanism.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from kcodec.broker.security.sasl import SaslAuthenticationFailed, ServerMechanism

__all__ = ["SaslAuthenticator", "SASL_APIS", "UNAUTHENTICATED_APIS"]

log = logging.getLogger(__name__)

SASL_APIS = (17, 36)
UNAUTHENTICATED_APIS = frozenset((18, 17, 36))

NONE = 0
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_SASL_MECHANISM = 33
SASL_AUTHENTICATION_FAILED = 58


class SaslAuthenticator:
    """``mechanisms``: name -> factory of a fresh ``ServerMechanism`` (one per exchange)."""

    HANDSHAKE, AUTHENTICATE, AUTHENTICATED = "handshake", "authenticate", "authenticated"

    def __init__(self, mechanisms: dict[str, Callable[[], ServerMechanism]],
                 connections_max_reauth_ms: int = 0,
                 clock: Callable[[], float] = time.time) -> None:
        if not mechanisms:
            raise ValueError("a SASL listener needs at least one mechanism")
        self.mechanisms = dict(mechanisms)
        self.max_reauth_ms = connections_max_reauth_ms
        self.clock = clock
        self.state = self.HANDSHAKE
        self.principal: str | None = None
        self.mechanism_name: str | None = None
        self.session_expires_at: float | None = None
        self.close_after = False
        self.failure: str | None = None     # why the last exchange failed, for the log
        self.reauthentications = 0
        self._mech: ServerMechanism | None = None
        self._pending_name: str | None = None

    def __repr__(self) -> str:
        return f"<SaslAuthenticator {self.state} principal={self.principal!r}>"

    @property
    def authenticated(self) -> bool:
        return self.principal is not None and not self.expired()

    def expired(self) -> bool:
        return self.session_expires_at is not None and self.clock() >= self.session_expires_at

    def allowed(self, api_key: int) -> bool:
        """May a request of ``api_key`` be served now?"""
        if api_key in UNAUTHENTICATED_APIS:
            return True
        return self.state == self.AUTHENTICATED and not self.expired()

    # ------------------------------------------------------------------ requests
    def handshake(self, body: Any) -> dict:
        """SaslHandshake: pick the mechanism for the next exchange."""
        name = _field(body, "mechanism")
        enabled = sorted(self.mechanisms)
        if self.state == self.AUTHENTICATE:
            self.close_after = True
            self.failure = "SaslHandshake again in the middle of an exchange"
            return {"error_code": ILLEGAL_SASL_STATE, "mechanisms": enabled}
        if name not in self.mechanisms:
            self.close_after = self.state != self.AUTHENTICATED
            self.failure = (f"mechanism {name!r} is not enabled here "
                            f"(enabled: {', '.join(enabled)})")
            return {"error_code": UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled}
        if self.state == self.AUTHENTICATED and name != self.mechanism_name:
            # KIP-368: a re-authentication may not switch mechanisms
            self.close_after = True
            self.failure = (f"re-authentication with mechanism {name!r}, not "
                            f"{self.mechanism_name!r}")
            return {"error_code": ILLEGAL_SASL_STATE, "mechanisms": enabled}
        self._pending_name = name
        self._mech = self.mechanisms[name]()
        self.state = self.AUTHENTICATE
        return {"error_code": NONE, "mechanisms": enabled}

    def authenticate(self, body: Any, version: int = 2) -> dict:
        """SaslAuthenticate: one step of the exchange."""
        if self.state != self.AUTHENTICATE or self._mech is None:
            self.close_after = True
            self.failure = "SaslAuthenticate without a preceding SaslHandshake"
            return self._fail(ILLEGAL_SASL_STATE,
                              "SaslAuthenticate without a preceding SaslHandshake")
        data = _field(body, "auth_bytes") or b""
        mech = self._mech
        try:
            out = mech.step(bytes(data))
        except SaslAuthenticationFailed as exc:
            self.close_after = True
            self._mech = None
            # the log line may say more than the client is told (a validator's reason)
            self.failure = _who(self._pending_name, mech,
                                getattr(mech, "detail", None) or str(exc))
            return self._fail(SASL_AUTHENTICATION_FAILED, str(exc))
        except Exception:    # a bug in a mechanism or validator: refuse, keep the traceback
            log.exception("kcodec broker: SASL mechanism %s failed", self._pending_name)
            self.close_after = True
            self._mech = None
            self.failure = _who(self._pending_name, mech, "the mechanism failed (see above)")
            return self._fail(SASL_AUTHENTICATION_FAILED,
                              f"{self._pending_name}: the broker failed to check the "
                              "credentials")
        if not mech.done:
            return {"error_code": NONE, "error_message": None, "auth_bytes": out,
                    "session_lifetime_ms": 0}
        if self.principal is not None and mech.principal != self.principal:
            self.close_after = True
            self.failure = _who(self._pending_name, mech, "re-authentication as another "
                                f"principal than {self.principal!r}")
            return self._fail(SASL_AUTHENTICATION_FAILED,
                              "re-authentication must keep the same principal")
        if self.principal is not None:
            self.reauthentications += 1
        self.principal = mech.principal
        self.mechanism_name = self._pending_name
        self._mech = None
        self.state = self.AUTHENTICATED
        now = self.clock()
        expiry = None
        if self.max_reauth_ms > 0:
            expiry = now + self.max_reauth_ms / 1000
        if mech.session_expires_at is not None:
            expiry = mech.session_expires_at if expiry is None else min(expiry, mech.session_expires_at)
        self.session_expires_at = expiry
        lifetime = 0 if expiry is None else max(int((expiry - now) * 1000), 1)
        return {"error_code": NONE, "error_message": None, "auth_bytes": out,
                "session_lifetime_ms": lifetime}

    def _fail(self, code: int, message: str) -> dict:
        self.state = self.HANDSHAKE if self.principal is None else self.state
        return {"error_code": code, "error_message": message, "auth_bytes": b"",
                "session_lifetime_ms": 0}


def _who(mechanism: str | None, mech: ServerMechanism, why: str) -> str:
    """``mechanism M, user 'name': why`` for the log (the name as the client gave it,
    quoted so that control characters in it cannot forge log lines)."""
    user = getattr(mech, "user", None)
    user = "(not given)" if user is None else user
    return f"mechanism {mechanism}, user {user!r}: {why}"


def _field(body: Any, name: str) -> Any:
    return body.get(name) if isinstance(body, dict) else getattr(body, name, None)
