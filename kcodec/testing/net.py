"""Loopback helpers for harnesses that start a broker process: a free port, and whether a
port accepts connections yet."""

from __future__ import annotations

import socket

__all__ = ["BrokerUnavailable", "accepts", "free_port"]


class BrokerUnavailable(RuntimeError):
    """An outside broker could not be started (its package is missing, or it did not come
    up); the message says which and what to install."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on at the moment of the call."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def accepts(port: int, host: str = "127.0.0.1") -> bool:
    """Whether ``host:port`` accepts a TCP connection within 0.2 s."""
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False
