"""Broker-side security building blocks, sans-I/O: SASL mechanisms and per-connection
authentication state, and TLS contexts for listeners.

    from kcodec.broker.security import SaslAuthenticator, PlainServer, ScramServer
    auth = SaslAuthenticator({"PLAIN": lambda: PlainServer({"alice": "secret"})})

    listener.py        what a listener needs: TLS context, SASL mechanisms, the request gate
    authenticator.py   per-connection SASL state for a listener
    sasl.py            the server side of Kafka's SASL mechanisms
    oidc.py            OAUTHBEARER tokens checked against an OIDC provider's JWKS (KIP-768)
    scram_store.py     the SCRAM credentials: changed and read by the SCRAM APIs, used by logins
    secret.py          the broker's secret, from which fake SCRAM credentials are derived
    principal.py       the principal of a TLS client certificate, as Kafka's default builder
    tls.py             TLS contexts for listeners (and the matching client trust), from files
"""

from kcodec.broker.security.authenticator import (
    SASL_APIS,
    UNAUTHENTICATED_APIS,
    SaslAuthenticator,
)
from kcodec.broker.security.listener import ListenerSecurity, SaslGate
from kcodec.broker.security.oidc import JwksValidator
from kcodec.broker.security.principal import PrincipalMapper
from kcodec.broker.security.sasl import (
    OAuthBearerServer,
    PlainServer,
    SaslAuthenticationFailed,
    ScramCredential,
    ScramServer,
    ServerMechanism,
    TokenInfo,
    fake_scram_credential,
    make_scram_credential,
    plain_check,
    scram_salt,
)
from kcodec.broker.security.secret import broker_secret
from kcodec.broker.security.tls import peer_principal, server_context

__all__ = ["JwksValidator", "ListenerSecurity", "SaslGate", "SaslAuthenticator", "SASL_APIS", "UNAUTHENTICATED_APIS", "ServerMechanism",
           "PlainServer", "ScramServer", "ScramCredential", "make_scram_credential",
           "OAuthBearerServer", "TokenInfo", "SaslAuthenticationFailed", "server_context",
           "peer_principal", "PrincipalMapper", "fake_scram_credential", "scram_salt", "broker_secret",
           "plain_check"]
