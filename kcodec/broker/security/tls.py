"""TLS contexts for broker listeners (and the matching client trust), from file names.

``server_context(certfile, keyfile)`` serves TLS 1.2+; ``client_auth`` is Java's
``ssl.client.auth``: ``"none"``, ``"requested"`` or ``"required"`` (mutual TLS, the client's
certificate checked against ``cafile``). ``peer_principal`` gives a verified client
certificate's subject as Kafka writes it (RFC 2253: ``CN=...,O=...``, escaped), mapped by
``ssl.principal.mapping.rules`` (:mod:`kcodec.broker.security.principal`).
"""

from __future__ import annotations

import ssl
from typing import Any

from kcodec.broker.security.principal import PrincipalMapper, distinguished_name

__all__ = ["server_context", "peer_principal", "CLIENT_AUTH"]

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
               "required": ssl.CERT_REQUIRED}


def server_context(certfile: str, keyfile: str | None = None, password: str | None = None,
                   cafile: str | None = None, client_auth: str = "none") -> ssl.SSLContext:
    """A server-side context; errors name the file that failed, never the password."""
    if client_auth not in CLIENT_AUTH:
        raise ValueError(f"ssl_client_auth must be one of {', '.join(CLIENT_AUTH)}, "
                         f"got {client_auth!r}")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(certfile, keyfile, password=password)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"ssl_keystore: cannot load certificate {certfile!r}"
                         f"{'' if keyfile is None else f' / key {keyfile!r}'}: "
                         f"{getattr(exc, 'strerror', None) or exc.args[-1]}") from None
    if client_auth != "none":
        if cafile is None:
            raise ValueError(f"ssl_client_auth={client_auth!r} needs a CA file to check "
                             "client certificates")
        try:
            ctx.load_verify_locations(cafile)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"ssl_truststore: cannot load CA file {cafile!r}: "
                             f"{getattr(exc, 'strerror', None) or exc.args[-1]}") from None
    ctx.verify_mode = CLIENT_AUTH[client_auth]
    return ctx


def peer_principal(ssl_object: Any, mapper: PrincipalMapper | None = None) -> str:
    """The principal name of the verified peer certificate, or ``ANONYMOUS``: its subject as
    RFC 2253 writes it (``CN=...,O=...``, special characters escaped), through ``mapper``
    (``ssl.principal.mapping.rules``; default: unchanged). Raises :class:`NoMatchingRule`
    when no rule applies."""
    cert = ssl_object.getpeercert() if ssl_object is not None else None
    if not cert:
        return "ANONYMOUS"
    name = distinguished_name(cert)
    if not name:
        return "ANONYMOUS"
    return (mapper or _DEFAULT).name(name)


_DEFAULT = PrincipalMapper()
