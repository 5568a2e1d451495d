"""Adapters that make other Kafka clients use kcodec as their record codec.

    kcodec.compat.kafka_python.install()     # kafka-python 3.0.x
    kcodec.compat.aiokafka.install()         # aiokafka 0.14.x

or, without touching code, ``KCODEC_PATCH=kafka_python,aiokafka`` in the environment: the
listed adapters are installed by ``import kcodec`` (import kcodec before the client makes
its consumers and producers, e.g. with ``python -c`` or ``sitecustomize``). Each module
imports its peer only when installed; ``uninstall()`` restores the peer's own classes.

    kafka_python.py   kafka-python builds and reads every record with kcodec
    aiokafka.py       aiokafka builds and reads every record with kcodec
    _core.py          what both share: batches and builders shaped as the peers', the patching
    _peer.py          the hot paths the adapters need, from the twin ``kcodec._impl`` chose
"""

from __future__ import annotations

import importlib

__all__ = ["ADAPTERS", "install", "uninstall"]

ADAPTERS = ("kafka_python", "aiokafka")


def _module(name: str):  # type: ignore[no-untyped-def]
    name = name.strip().replace("-", "_")
    if name not in ADAPTERS:
        raise ValueError(f"unknown kcodec adapter {name!r} (known: {', '.join(ADAPTERS)})")
    return importlib.import_module(f"kcodec.compat.{name}")


def install(*names: str) -> None:
    """Install the named adapters ("kafka_python", "aiokafka")."""
    for name in names:
        _module(name).install()


def uninstall(*names: str) -> None:
    """Uninstall the named adapters."""
    for name in names:
        _module(name).uninstall()
