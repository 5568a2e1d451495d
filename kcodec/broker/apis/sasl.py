"""SaslHandshake (17) and SaslAuthenticate (36) as the handler pool sees them.

On a SASL listener the network layer answers both itself (``kcodec.broker.security``,
per-connection state), so these handlers only run on listeners without SASL: they say
the state is wrong. Registering them makes ApiVersions advertise the SASL APIs, as Kafka
does on every listener.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kcodec.broker.apis.registry import Answer, Incoming, api
from kcodec.protocol import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

if TYPE_CHECKING:
    from kcodec.broker.node import Node

ILLEGAL_SASL_STATE = 34


@api(SaslHandshakeRequest, 0, 1)
def sasl_handshake(node: Node, req: Incoming[SaslHandshakeRequest]
                  ) -> Answer[SaslHandshakeResponse]:
    return SaslHandshakeResponse(error_code=ILLEGAL_SASL_STATE, mechanisms=[])


@api(SaslAuthenticateRequest, 0, 2)
def sasl_authenticate(node: Node, req: Incoming[SaslAuthenticateRequest]
                     ) -> Answer[SaslAuthenticateResponse]:
    return SaslAuthenticateResponse(error_code=ILLEGAL_SASL_STATE,
                                    error_message="this listener does not use SASL",
                                    auth_bytes=b"")
