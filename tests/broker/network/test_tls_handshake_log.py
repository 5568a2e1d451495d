"""Every failed TLS handshake on a broker listener is logged with the peer and the reason:
plaintext on the TLS port, a client that does not trust the broker's CA, a refused protocol
version, and a client that connects and says nothing."""

from __future__ import annotations

import socket
import ssl
import struct
import time

import pytest

from kcodec.broker import Cluster
from kcodec.broker.network import processor
from kcodec.broker.security import ListenerSecurity, server_context
from tests.support.security_util import Certs


@pytest.fixture(scope="module")
def tls_broker():
    certs = Certs()
    sec = ListenerSecurity(ssl_context=server_context(certs.certfile, certs.keyfile))
    with Cluster(1, host="127.0.0.1", security=sec) as broker:
        host, port = broker.bootstrap.split(",")[0].rsplit(":", 1)
        yield host, int(port), certs
    certs.cleanup()


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "kcodec.broker.security" and "failed TLS handshake" in r.getMessage()]


def _wait_for_line(caplog, n: int, timeout: float = 5.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(_lines(caplog)) < n:
        time.sleep(0.02)
    return _lines(caplog)


def _tls_client(host: str, port: int, ctx: ssl.SSLContext) -> None:
    with socket.create_connection((host, port), timeout=5) as raw:
        try:
            with ctx.wrap_socket(raw, server_hostname="localhost"):
                pass
        except (ssl.SSLError, OSError):
            pass


def test_plaintext_on_a_tls_port_is_logged(tls_broker, caplog):
    host, port, _ = tls_broker
    caplog.set_level("WARNING", "kcodec.broker.security")
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(struct.pack(">ihhi", 8 + 2, 18, 3, 1) + b"\0\0")   # ApiVersions, in clear
        try:
            s.recv(100)
        except OSError:
            pass
    lines = _wait_for_line(caplog, 1)
    assert lines and "127.0.0.1:" in lines[0] and "on PLAINTEXT" not in lines[0]


def test_an_untrusted_ca_is_logged(tls_broker, caplog):
    host, port, _ = tls_broker
    caplog.set_level("WARNING", "kcodec.broker.security")
    _tls_client(host, port, ssl.create_default_context())     # the system's CAs only
    lines = _wait_for_line(caplog, 1)
    assert lines and "UNKNOWN_CA" in lines[0].upper().replace(" ", "_")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_an_old_protocol_version_is_logged(tls_broker, caplog):
    host, port, certs = tls_broker
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(certs.cafile)
    try:
        ctx.minimum_version = ssl.TLSVersion.TLSv1
        ctx.maximum_version = ssl.TLSVersion.TLSv1_1
        ctx.set_ciphers("ALL:@SECLEVEL=0")
    except (ValueError, ssl.SSLError):
        pytest.skip("this OpenSSL cannot offer TLS 1.0/1.1 at all")
    caplog.set_level("WARNING", "kcodec.broker.security")
    _tls_client(host, port, ctx)
    lines = _wait_for_line(caplog, 1)
    assert lines, "a TLS 1.0/1.1 client was refused without a word"


def test_a_silent_client_is_logged(tls_broker, caplog, monkeypatch):
    host, port, _ = tls_broker
    monkeypatch.setattr(processor, "TLS_HANDSHAKE_TIMEOUT_S", 0.3)
    caplog.set_level("WARNING", "kcodec.broker.security")
    with socket.create_connection((host, port), timeout=5):
        lines = _wait_for_line(caplog, 1)
    assert lines and "no handshake within 0.3 s" in lines[0]
