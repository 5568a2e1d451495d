"""A tiny blocking connection for the broker tests: send a request, read its response."""

from __future__ import annotations

import socket
from typing import Any

from kcodec.protocol import FrameSplitter, decode_response, encode_request


class Conn:
    def __init__(self, bootstrap: str, client_id: str = "kcodec-test", timeout: float = 15.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.client_id = client_id
        self.correlation_id = 0
        self.splitter = FrameSplitter()
        self.pending: list[bytes] = []

    def call(self, request: Any, version: int) -> Any:
        self.correlation_id += 1
        self.sock.sendall(encode_request(request, version, self.correlation_id, self.client_id))
        while not self.pending:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            self.pending += self.splitter.feed(chunk)
        frame = self.pending.pop(0)
        return decode_response(frame, request.API_KEY, version, self.correlation_id)[1]

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
