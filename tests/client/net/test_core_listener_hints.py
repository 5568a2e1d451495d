"""A client whose security settings do not fit the listener is told so, at once.

Before, a PLAINTEXT client on a SASL listener retried for api_timeout_ms (14 s of a 15 s
budget) and then said only "closed the connection".
"""

from __future__ import annotations

import re
import time

import pytest

from kcodec.client import Admin, Consumer, TopicPartition
from kcodec.client.errors import BrokerNotAvailableError
from kcodec.client.net.core import Connection
from kcodec.errors import ProtocolError

SASL_HINT = ("closed the connection on the first request after the Kafka handshake without "
             "answering it: the listener probably requires SASL (security_protocol is "
             "PLAINTEXT; use SASL_PLAINTEXT or SASL_SSL")


@pytest.fixture(scope="module")
def sasl_broker():
    from kcodec.broker import Cluster
    from kcodec.broker.security import ListenerSecurity
    from kcodec.broker.security.sasl import PlainServer

    sec = ListenerSecurity(sasl={"PLAIN": lambda: PlainServer({"alice": "secret"})})
    with Cluster(1, listeners="SASL_PLAINTEXT://127.0.0.1:0",
                 listener_security={"SASL_PLAINTEXT": sec}) as c:
        yield c


def test_admin_without_sasl_on_a_sasl_listener_fails_fast(sasl_broker) -> None:
    t0 = time.monotonic()
    with pytest.raises(BrokerNotAvailableError, match=re.escape(SASL_HINT)) as e:
        with Admin(bootstrap_servers=sasl_broker.bootstrap, api_timeout_ms=15000) as a:
            a.list_topics()
    assert time.monotonic() - t0 < 3
    assert e.value.retriable is False


def test_consumer_without_sasl_on_a_sasl_listener_fails_fast(sasl_broker) -> None:
    t0 = time.monotonic()
    with Consumer(bootstrap_servers=sasl_broker.bootstrap, api_timeout_ms=15000) as c:
        c.assign([TopicPartition("t", 0)])
        with pytest.raises(BrokerNotAvailableError, match=re.escape(SASL_HINT)):
            while time.monotonic() - t0 < 10:
                c.poll(0.2)
    assert time.monotonic() - t0 < 3


def test_with_sasl_it_works(sasl_broker) -> None:
    with Admin(bootstrap_servers=sasl_broker.bootstrap, security_protocol="SASL_PLAINTEXT",
               sasl_username="alice", sasl_password="secret") as a:
        a.list_topics()


def test_a_tls_answer_is_named() -> None:
    c = Connection()
    c.handshake()
    with pytest.raises(ProtocolError, match="answered with TLS, not Kafka: the listener "
                                            r"requires TLS \(security_protocol SSL"):
        c.receive(b"\x15\x03\x03\x00\x02\x02\x46")    # a TLS alert record


def test_a_tls_listener_hint() -> None:
    from kcodec.broker import Cluster
    from kcodec.broker.security import ListenerSecurity
    from kcodec.broker.security.tls import server_context
    from tests.support.security_util import Certs

    certs = Certs()
    try:
        ctx = server_context(certs.certfile, certs.keyfile)
        with Cluster(1, listeners="SSL://127.0.0.1:0",
                     listener_security={"SSL": ListenerSecurity(ssl_context=ctx)}) as c:
            t0 = time.monotonic()
            with pytest.raises(BrokerNotAvailableError,
                               match="If the listener requires TLS, security_protocol must "
                                     "be SSL or SASL_SSL"):
                with Admin(bootstrap_servers=c.bootstrap, api_timeout_ms=15000) as a:
                    a.list_topics()
            assert time.monotonic() - t0 < 3
    finally:
        certs.cleanup()
