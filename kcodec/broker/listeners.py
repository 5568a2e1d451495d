"""Listeners: several named endpoints per node, each with its own security protocol, as
Kafka's ``listeners`` / ``listener.security.protocol.map`` / ``advertised.listeners``.

    listeners = parse_listeners(
        "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        security={"SSL": ListenerSecurity(ssl_context=ctx),
                  "SASL_SSL": ListenerSecurity(ssl_context=ctx, sasl=mechanisms)})

    # names other than the four protocols go through the protocol map
    parse_listeners("INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
                    protocol_map="INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
                    advertised="INTERNAL://localhost:0,EXTERNAL://kafka.example:9094",
                    security={"EXTERNAL": ...})

A connection remembers the listener it came through; Metadata, DescribeCluster and
FindCoordinator answer with every node's address *on that listener* (a node without it is
left out, as Kafka does), so a client stays on the protocol it bootstrapped with. Port 0 binds
a free port; an advertised port 0 means the bound port; an advertised host left empty means
the bound host.

With several nodes, node ``i`` binds each fixed port plus ``i`` (9092 -> 9092, 9093, ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Listener", "parse_listeners", "listener_protocols", "PROTOCOLS", "DEFAULT_PROTOCOL_MAP"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = {p: p for p in PROTOCOLS}
_ENDPOINT = re.compile(r"^([A-Za-z0-9_.-]+)://(\[[0-9A-Fa-f:.]*\]|[^:\[\]]*):(-?\d+)$")


@dataclass
class Listener:
    """One listener of every node: a name, its protocol and security, where to bind and what
    to advertise (``advertised_host`` None or empty: the bound host; port 0: the bound port)."""

    name: str
    protocol: str = "PLAINTEXT"
    host: str = "127.0.0.1"
    port: int = 0
    security: Any = None                    # kcodec.broker.security.ListenerSecurity
    advertised_host: str | None = None
    advertised_port: int = 0

    def __post_init__(self) -> None:
        self.name = self.name.upper()
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"listener {self.name}: unknown security protocol {self.protocol!r} "
                             f"(one of {', '.join(PROTOCOLS)})")
        if not 0 <= self.port <= 65535 or not 0 <= self.advertised_port <= 65535:
            raise ValueError(f"listener {self.name}: port out of range")
        have = "PLAINTEXT" if self.security is None else self.security.protocol
        if have != self.protocol:
            need = {"SSL": "an ssl_context", "SASL_PLAINTEXT": "SASL mechanisms",
                    "SASL_SSL": "an ssl_context and SASL mechanisms",
                    "PLAINTEXT": "no TLS and no SASL"}[self.protocol]
            raise ValueError(f"listener {self.name} is {self.protocol}, which needs {need}; "
                             f"its security settings make it {have}")


def _endpoints(text: str, what: str) -> list[tuple[str, str, int]]:
    out = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        m = _ENDPOINT.match(item)
        if m is None:
            raise ValueError(f"{what}: {item!r} is not NAME://host:port")
        port = int(m.group(3))
        if not 0 <= port <= 65535:
            raise ValueError(f"{what}: port {port} out of range in {item!r}")
        out.append((m.group(1).upper(), m.group(2).strip("[]"), port))
    if not out:
        raise ValueError(f"{what}: no listener given")
    return out


def _protocol_map(value: str | dict[str, str] | None) -> dict[str, str]:
    if value is None:
        return dict(DEFAULT_PROTOCOL_MAP)
    if isinstance(value, dict):
        pairs = list(value.items())
    else:
        pairs = []
        for item in (s.strip() for s in value.split(",")):
            if not item:
                continue
            name, sep, proto = item.partition(":")
            if not sep or not name or not proto:
                raise ValueError(f"listener_security_protocol_map: {item!r} is not NAME:PROTOCOL")
            pairs.append((name, proto))
    out = {}
    for name, proto in pairs:
        if proto.upper() not in PROTOCOLS:
            raise ValueError(f"listener_security_protocol_map: unknown protocol {proto!r} for "
                             f"{name} (one of {', '.join(PROTOCOLS)})")
        out[name.strip().upper()] = proto.strip().upper()
    return out


def listener_protocols(listeners: str, protocol_map: str | dict[str, str] | None = None
                       ) -> dict[str, str]:
    """``{listener name: security protocol}`` of Kafka's ``listeners`` setting (checked)."""
    pmap = _protocol_map(protocol_map)
    out = {}
    for name, _, _ in _endpoints(listeners, "listeners"):
        if name not in pmap:
            raise ValueError(f"listeners: {name} has no security protocol (name it in "
                             "listener_security_protocol_map, or use a protocol as the name)")
        out[name] = pmap[name]
    return out


def parse_listeners(listeners: str, *, protocol_map: str | dict[str, str] | None = None,
                    advertised: str | None = None,
                    security: dict[str, Any] | None = None) -> list[Listener]:
    """Listeners from Kafka's three settings; ``security`` maps a listener name to its
    ``ListenerSecurity`` (TLS context, SASL mechanisms). Errors name the setting at fault."""
    pmap = _protocol_map(protocol_map)
    sec = {k.upper(): v for k, v in (security or {}).items()}
    eps = _endpoints(listeners, "listeners")
    names = [n for n, _, _ in eps]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"listeners: each name may appear once, {', '.join(sorted(dup))} repeats")
    ports = [p for _, _, p in eps if p]
    if len(ports) != len(set(ports)):
        raise ValueError("listeners: two listeners on one port")
    unknown = set(sec) - set(names)
    if unknown:
        raise ValueError(f"listener security given for {', '.join(sorted(unknown))}, "
                         "which is not a listener")
    adv: dict[str, tuple[str, int]] = {}
    if advertised:
        for name, host, port in _endpoints(advertised, "advertised_listeners"):
            if name not in names:
                raise ValueError(f"advertised_listeners: {name} is not a listener")
            adv[name] = (host, port)
    out = []
    for name, host, port in eps:
        if name not in pmap:
            raise ValueError(f"listeners: {name} has no security protocol (name it in "
                             "listener_security_protocol_map, or use a protocol as the name)")
        a_host, a_port = adv.get(name, (None, 0))
        out.append(Listener(name, pmap[name], host or "0.0.0.0", port, sec.get(name),
                            a_host or None, a_port))
    return out
