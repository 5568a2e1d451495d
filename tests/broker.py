"""The real broker for the tests: Tansu, started by ``kcodec.client._tansu`` (see there)."""

from kcodec.client._tansu import BrokerUnavailable, Tansu, free_port, tansu_binary

__all__ = ["BrokerUnavailable", "Tansu", "free_port", "tansu_binary"]
