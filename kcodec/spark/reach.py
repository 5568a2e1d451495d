"""Which brokers this machine can reach, and an error that names the cause.

On a cluster, the driver (which plans) and every executor (which reads and writes) connect
to Kafka on their own. They find the cluster through ``kafka.bootstrap.servers`` and then
connect to the addresses the brokers advertise (the broker setting
``advertised.listeners``), not to the bootstrap address. A broker that advertises an
address only some machines can reach (``127.0.0.1``, a container's name, a private
network) answers the bootstrap request and then cannot be reached: the client's own error
names only the address. ``named_cause`` turns such a failure into one that says which
addresses answer from here, which do not, and what to change.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["DRIVER", "EXECUTOR", "probe", "diagnose", "named_cause"]

#: who is connecting, as the messages say it
DRIVER = "the machine where Spark plans the query"
EXECUTOR = "this Spark executor"

_PROBE_TIMEOUT = 3.0


def probe(host: str, port: int, timeout: float = _PROBE_TIMEOUT) -> str | None:
    """None when ``host:port`` accepts a TCP connection from here, else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except socket.gaierror as exc:
        return f"cannot resolve {host!r}: {exc.strerror or exc}"
    except TimeoutError:
        return f"no answer within {timeout:.0f} s"
    except OSError as exc:
        return exc.strerror or str(exc)


def _where(role: str) -> str:
    return f"{role} ({socket.gethostname()})"


def diagnose(bootstrap: str, client_kw: dict[str, Any], role: str) -> str | None:
    """What keeps ``role`` from its brokers: no bootstrap server reachable, or advertised
    addresses that cannot be reached although a bootstrap server answers. None when every
    address answers (the failure has another cause)."""
    from kcodec.client import Admin
    from kcodec.client.config import AdminConfig, parse_bootstrap
    from kcodec.errors import KcodecError

    servers = parse_bootstrap(bootstrap)
    tried = [(h, p, probe(h, p)) for h, p in servers]
    answered = [(h, p) for h, p, why in tried if why is None]
    if not answered:
        failed = "; ".join(f"{h}:{p} ({why})" for h, p, why in tried)
        return (f"no bootstrap server can be reached from {_where(role)}: {failed}. Check "
                "kafka.bootstrap.servers, and that the driver and every executor can reach "
                "the brokers (firewalls, host names each machine resolves)")
    names = {f.name for f in AdminConfig.__dataclass_fields__.values()}
    kw = {k: v for k, v in client_kw.items() if k in names and k != "bootstrap_servers"}
    kw.update(api_timeout_ms=10_000, request_timeout_ms=5_000)
    try:
        with Admin(bootstrap_servers=bootstrap, **kw) as admin:
            brokers = admin.describe_cluster([]).brokers
    except (KcodecError, OSError):     # the metadata itself fails: nothing better to say
        return None
    bad = [(b, why) for b in brokers if (why := probe(b.host, b.port)) is not None]
    if not bad:
        return None
    h, p = answered[0]
    lost = "; ".join(f"node {b.node_id} at {b.host}:{b.port} ({why})" for b, why in bad)
    return (f"the bootstrap server {h}:{p} answers from {_where(role)}, but the "
            f"address{'es' if len(bad) > 1 else ''} the brokers advertise cannot be reached "
            f"from there: {lost}. Clients connect to the addresses the brokers advertise "
            "(the broker setting advertised.listeners), not to the bootstrap address; with "
            "Spark the driver and every executor connect to them, so each advertised "
            "address must be reachable from every machine of the cluster (not 127.0.0.1 or "
            "localhost unless Spark and Kafka share one machine)")


@contextmanager
def named_cause(bootstrap: str, client_kw: dict[str, Any], role: str) -> Iterator[None]:
    """Re-raise a connection failure inside the block with its cause named (see
    ``diagnose``); the original error follows as the cause."""
    from kcodec.client.errors import BrokerNotAvailableError, KafkaTimeoutError

    try:
        yield
    except (BrokerNotAvailableError, KafkaTimeoutError) as exc:
        why = diagnose(bootstrap, client_kw, role)
        if why is None:
            raise
        raise BrokerNotAvailableError(f"{why} (the client's error: {exc})",
                                      retriable=False) from exc
