"""SCRAM's maths and message syntax (RFC 5802, RFC 7677), for both ends of the exchange.

The client (kcodec.client.net.sasl) and the broker (kcodec.broker.security.sasl) both
derive keys from a password and read the comma-separated attribute messages::

    SaltedPassword := Hi(password, salt, i)          PBKDF2 with HMAC-hash, i iterations
    ClientKey      := HMAC(SaltedPassword, "Client Key")
    StoredKey      := H(ClientKey)
    ServerKey      := HMAC(SaltedPassword, "Server Key")
    message        := attr ("," attr)*    attr := letter "=" value
"""

from __future__ import annotations

import hashlib
import hmac

from kcodec.errors import KcodecError

__all__ = ["HASHES", "ScramFormatError", "salted_password", "keys", "parse_attributes",
           "escape_name"]

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class ScramFormatError(KcodecError):
    """A SCRAM message that does not parse (the text names no secret)."""


def salted_password(hash_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(Normalize(password), salt, i) of RFC 5802 (PBKDF2 with HMAC-hash)."""
    return hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)


def keys(hash_name: str, salted: bytes) -> tuple[bytes, bytes, bytes]:
    """(ClientKey, StoredKey, ServerKey) from the salted password."""
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    stored_key = hashlib.new(hash_name, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hash_name).digest()
    return client_key, stored_key, server_key


def parse_attributes(msg: bytes, what: str,
                     error: type[Exception] = ScramFormatError) -> dict[str, str]:
    """The attributes of a SCRAM message (the first of a repeated one wins); ``error`` (the
    caller's exception class) names ``what`` when the message is not UTF-8 or an attribute
    is malformed."""
    try:
        text = msg.decode()
    except UnicodeDecodeError:
        raise error(f"SCRAM {what} is not UTF-8") from None
    out: dict[str, str] = {}
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=":
            raise error(f"SCRAM {what} has a malformed attribute")
        out.setdefault(part[0], part[2:])
    return out


def escape_name(name: str) -> str:
    """A user name as SCRAM sends it (``=`` and ``,`` escaped)."""
    return name.replace("=", "=3D").replace(",", "=2C")
