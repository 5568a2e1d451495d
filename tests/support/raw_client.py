"""A raw SASL PLAIN connection to a broker: typed requests in, typed responses out, one at a
time, for tests that must act as a given user without a whole client."""

from __future__ import annotations

import socket
import struct
from typing import Any

from kcodec.protocol import (
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
    decode_response,
    encode_request,
)

__all__ = ["Raw"]


class Raw:
    """A SASL PLAIN connection speaking raw requests."""

    def __init__(self, addr: tuple[str, int], user: str) -> None:
        self.sock = socket.create_connection(addr, timeout=10)
        self.cid = 0
        assert self.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        auth = self.call(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0pw".encode()), 2)
        assert auth.error_code == 0

    def call(self, msg: Any, version: int) -> Any:
        self.cid += 1
        self.sock.sendall(encode_request(msg, version, self.cid))
        size = struct.unpack(">i", self._read(4))[0]
        return decode_response(self._read(size), msg.API_KEY, version, self.cid)[1]

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "closed"
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()
