"""What a broker listener needs for security: TLS context and SASL mechanisms, and the gate
the network layer runs before dispatching a request.

    ListenerSecurity(ssl_context=server_context("cert.pem", "key.pem"),
                     sasl={"PLAIN": lambda: PlainServer(users)},
                     connections_max_reauth_ms=0,
                     ssl_principal_mapping_rules="RULE:^CN=([^,]*),.*$/$1/,DEFAULT")

``SaslGate.on_request(api_key, version, frame)`` returns ``(answer_bytes, close)``: the
encoded SaslHandshake/SaslAuthenticate response to send (and whether to close after it),
``(None, True)`` for a request the connection may not make yet (Kafka closes the
connection), or ``(None, False)``: dispatch as usual.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kcodec.broker.security.authenticator import SASL_APIS, SaslAuthenticator
from kcodec.broker.security.principal import DEFAULT_RULES, PrincipalMapper
from kcodec.broker.security.sasl import ServerMechanism
from kcodec.errors import KcodecError
from kcodec.protocol import RESPONSES, decode_request, encode_response

__all__ = ["ListenerSecurity", "SaslGate"]

MAX_SASL_ITEMS = 1_000      # arrays and tagged fields a SASL request may hold


@dataclass
class ListenerSecurity:
    ssl_context: ssl.SSLContext | None = None
    sasl: dict[str, Callable[[], ServerMechanism]] = field(default_factory=dict)
    connections_max_reauth_ms: int = 0
    #: Kafka's ssl.principal.mapping.rules: how a client certificate's name becomes the
    #: principal (parsed here, so a bad rule fails when the listener is made)
    ssl_principal_mapping_rules: str = DEFAULT_RULES
    principal_mapper: PrincipalMapper = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.principal_mapper = PrincipalMapper(self.ssl_principal_mapping_rules)

    @property
    def protocol(self) -> str:
        if self.sasl:
            return "SASL_SSL" if self.ssl_context else "SASL_PLAINTEXT"
        return "SSL" if self.ssl_context else "PLAINTEXT"

    def gate(self) -> SaslGate | None:
        return SaslGate(SaslAuthenticator(self.sasl, self.connections_max_reauth_ms)) \
            if self.sasl else None


class SaslGate:
    def __init__(self, auth: SaslAuthenticator) -> None:
        self.auth = auth

    @property
    def principal(self) -> str | None:
        return self.auth.principal

    @property
    def failure(self) -> str | None:
        """Why the exchange failed (mechanism, user name, reason; never a secret)."""
        return self.auth.failure

    def on_request(self, api_key: int, version: int, frame: bytes) -> tuple[bytes | None, bool]:
        if api_key not in SASL_APIS:
            return None, not self.auth.allowed(api_key)
        try:
            hdr, req = decode_request(frame, max_items=MAX_SASL_ITEMS)
        except KcodecError:
            return None, True
        resp = (self.auth.handshake(req) if api_key == 17
                else self.auth.authenticate(req, version))
        cls: Any = RESPONSES[api_key]
        body = cls(**{k: v for k, v in resp.items() if k in cls._names})
        return encode_response(body, version, hdr.correlation_id), self.auth.close_after
