"""Connection limits per node, as Kafka's broker has them:

* ``max_connections`` (Kafka's ``max.connections``): connections open at once on the node,
  every listener together;
* ``max_connections_per_ip`` (``max.connections.per.ip``): connections from one address;
* ``max_connections_per_ip_overrides`` (``max.connections.per.ip.overrides``): another limit
  for some hosts, ``{"127.0.0.1": 200, "build-box": 10}`` or Kafka's text
  ``"127.0.0.1:200,build-box:10"``; a host name is resolved once, when the node starts.
  ``max_connections_per_ip=0`` with overrides admits only the hosts named there;
* ``max_connections_per_user`` (``max.connections.per.user``, kcodec's own: Kafka bounds
  connections per address and per listener, and per-user only their creation rate, KIP-612):
  connections of one authenticated principal (SASL or a TLS certificate), counted once the
  principal is known; ANONYMOUS connections are bounded by address only, since every client
  of a listener without authentication is ANONYMOUS.

A connection past a limit is accepted and closed at once, and the refusal is logged (the
first from a host, then at most once per ``LOG_EVERY_S`` with the count since): the client
sees the connection closed and retries after its backoff. A connection whose principal is past its limit is closed when the
principal becomes known (after the TLS handshake, or at the SASL login, before the login is
answered). (Kafka closes a connection over the per-address limit the same way; over ``max.connections`` it instead stops accepting until a
connection ends, which leaves new clients waiting without an answer.)
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Mapping

__all__ = ["ConnectionQuotas", "parse_overrides"]

log = logging.getLogger(__name__)
LOG_EVERY_S = 10.0


def parse_overrides(value: str | Mapping[str, int] | None) -> dict[str, int]:
    """``{host: limit}`` from a mapping or Kafka's ``host:limit,...`` text (the limit after
    the last colon, so IPv6 addresses work). Errors say which entry is wrong."""
    if value is None:
        return {}
    pairs: list[tuple[str, object]]
    if isinstance(value, Mapping):
        pairs = [(str(k), v) for k, v in value.items()]
    else:
        pairs = []
        for item in (x.strip() for x in value.split(",")):
            if not item:
                continue
            name, sep, text = item.rpartition(":")
            if not sep or not name.strip():
                raise ValueError(f"max_connections_per_ip_overrides: {item!r} is not host:limit")
            pairs.append((name.strip().strip("[]"), text.strip()))
    out = {}
    for host, limit in pairs:
        try:
            n = int(limit)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            raise ValueError(f"max_connections_per_ip_overrides: the limit for {host!r} is "
                             f"{limit!r}, not a whole number") from None
        if n < 0:
            raise ValueError(f"max_connections_per_ip_overrides: the limit for {host!r} is "
                             f"negative ({n})")
        out[str(host)] = n
    return out


def _addresses(host: str) -> set[str]:
    """The addresses a host name (or address) stands for; a name that does not resolve
    stands for none (logged: its override then applies to nobody)."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        log.warning("kcodec broker: max_connections_per_ip_overrides: cannot resolve %r (%s); "
                    "its limit applies to no connection", host, exc)
        return set()
    return {str(info[4][0]) for info in infos}


class ConnectionQuotas:
    """Counts a node's open connections and admits or refuses new ones (thread-safe: the
    acceptors admit, the processors release)."""

    def __init__(self, max_connections: int | None = None,
                 max_connections_per_ip: int | None = None,
                 overrides: str | Mapping[str, int] | None = None,
                 max_connections_per_user: int | None = None) -> None:
        if max_connections is not None and max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        if max_connections_per_user is not None and max_connections_per_user < 1:
            raise ValueError(f"max_connections_per_user must be at least 1, got "
                             f"{max_connections_per_user}")
        if max_connections is not None and max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        per_host = parse_overrides(overrides)
        if max_connections_per_ip is not None and max_connections_per_ip < 0:
            raise ValueError(f"max_connections_per_ip must not be negative, got "
                             f"{max_connections_per_ip}")
        if max_connections_per_ip == 0 and not per_host:
            raise ValueError("max_connections_per_ip=0 admits nobody: give "
                             "max_connections_per_ip_overrides for the hosts to admit")
        self.max_connections = max_connections
        self.max_per_ip = max_connections_per_ip
        self.max_per_user = max_connections_per_user
        self.by_user: dict[str, int] = {}
        self.overrides: dict[str, int] = {}
        for host, n in per_host.items():
            for addr in _addresses(host) | ({host} if _is_address(host) else set()):
                self.overrides[addr] = n
        self._lock = threading.Lock()
        self.total = 0
        self.by_host: dict[str, int] = {}
        self._logged: dict[str, tuple[float, int]] = {}   # host -> (last log time, refused since)

    @property
    def active(self) -> bool:
        return (self.max_connections is not None or self.max_per_ip is not None
                or bool(self.overrides))

    def limit_for(self, host: str) -> int | None:
        """The per-address limit of ``host`` (None: no limit)."""
        return self.overrides.get(host, self.max_per_ip)

    def admit(self, host: str) -> str | None:
        """Count a new connection from ``host``; or, past a limit, why it is refused (and
        nothing is counted)."""
        with self._lock:
            if self.max_connections is not None and self.total >= self.max_connections:
                return (f"the node has max_connections={self.max_connections} connections "
                        "open")
            limit = self.limit_for(host)
            n = self.by_host.get(host, 0)
            if limit is not None and n >= limit:
                return f"{host} has {n} connections open, its limit is {limit}"
            self.total += 1
            self.by_host[host] = n + 1
            return None

    def release(self, host: str) -> None:
        with self._lock:
            n = self.by_host.get(host, 0)
            if n <= 1:
                self.by_host.pop(host, None)
            else:
                self.by_host[host] = n - 1
            if n > 0:
                self.total -= 1

    def admit_user(self, principal: str) -> str | None:
        """Count a connection as ``principal``'s once it is known; or, past
        ``max_connections_per_user``, why it is refused (and nothing is counted)."""
        with self._lock:
            n = self.by_user.get(principal, 0)
            if self.max_per_user is not None and n >= self.max_per_user:
                return (f"{principal} has {n} connections open, its limit is "
                        f"{self.max_per_user} (max.connections.per.user)")
            self.by_user[principal] = n + 1
            return None

    def release_user(self, principal: str) -> None:
        with self._lock:
            n = self.by_user.get(principal, 0)
            if n <= 1:
                self.by_user.pop(principal, None)
            else:
                self.by_user[principal] = n - 1

    def should_log(self, host: str, now: float | None = None) -> int | None:
        """None if this refusal is not to be logged; else how many were refused from
        ``host`` since the last line (this one included)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            last, count = self._logged.get(host, (-LOG_EVERY_S, 0))
            count += 1
            if now - last >= LOG_EVERY_S:
                self._logged[host] = (now, 0)
                if len(self._logged) > 10_000:     # hosts that came once: forget them
                    self._logged = {h: v for h, v in self._logged.items()
                                    if now - v[0] < LOG_EVERY_S}
                return count
            self._logged[host] = (last, count)
            return None


def _is_address(host: str) -> bool:
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
            return True
        except OSError:
            pass
    return False
