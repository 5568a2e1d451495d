"""A blocking raw-protocol client for broker tests: send one request, read its answer."""

from __future__ import annotations

import socket
import struct
from typing import Any

from kcodec.protocol import decode_response, encode_request


class Raw:
    client_id = "raw"      # (a subclass may connect its own way)

    def __init__(self, address: str, timeout: float = 10.0, client_id: str = "raw") -> None:
        host, port = address.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.cid = 0
        self.client_id = client_id

    def send(self, msg: Any, version: int) -> None:
        self.cid += 1
        self.sock.sendall(encode_request(msg, version, self.cid, client_id=self.client_id))

    def recv_frame(self) -> bytes:
        head = self._exact(4)
        return self._exact(struct.unpack(">i", head)[0])

    def _exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by the broker")
            buf += chunk
        return buf

    def call(self, msg: Any, version: int) -> Any:
        self.send(msg, version)
        return decode_response(self.recv_frame(), msg.API_KEY, version, self.cid)[1]

    def closed(self, timeout: float = 5.0) -> bool:
        """True if the broker closes the connection (reads EOF) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except TimeoutError:   # (an OSError too: test it first)
            return False
        except OSError:
            return True

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Raw:
        return self

    def __exit__(self, *a: object) -> None:
        self.close()
