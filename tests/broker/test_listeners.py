"""Several listeners with different protocols on one broker (Kafka's ``listeners``,
``listener.security.protocol.map``, ``advertised.listeners``): PLAINTEXT, SSL and SASL_SSL on
every node at once; Metadata and FindCoordinator answer with the listener the client came
through; kcodec's client and confluent-kafka use every listener at the same time."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

from kcodec.broker import Cluster
from kcodec.broker.listeners import Listener, parse_listeners
from kcodec.broker.security import (
    ListenerSecurity,
    PlainServer,
    ScramServer,
    make_scram_credential,
    server_context,
)
from kcodec.client import Admin, Consumer, Producer
from tests.support.security_util import Certs

USERS = {"alice": "alice-secret"}
FAST = dict(api_timeout_ms=15000, request_timeout_ms=10000)
NAMES = ("PLAINTEXT", "SSL", "SASL_SSL")


@pytest.fixture(scope="module")
def certs():
    c = Certs()
    yield c
    c.cleanup()


def _sasl() -> dict:
    creds = {u: make_scram_credential("SCRAM-SHA-256", p) for u, p in USERS.items()}
    return {"PLAIN": lambda: PlainServer(USERS),
            "SCRAM-SHA-256": lambda: ScramServer("SCRAM-SHA-256", creds)}


@pytest.fixture(scope="module")
def cluster(certs):
    ctx = server_context(certs.certfile, certs.keyfile)
    with Cluster(2, listeners="PLAINTEXT://localhost:0,SSL://localhost:0,SASL_SSL://localhost:0",
                 listener_security={"SSL": ListenerSecurity(ssl_context=ctx),
                                    "SASL_SSL": ListenerSecurity(ssl_context=ctx, sasl=_sasl())},
                 num_partitions=2) as c:
        yield c


def _kcodec_conf(cluster: Cluster, name: str, cafile: str) -> dict:
    conf: dict = {"bootstrap_servers": cluster.bootstrap_for(name).split(",")[0], **FAST}
    if name != "PLAINTEXT":
        conf.update(security_protocol=name, ssl_cafile=cafile)
    if name == "SASL_SSL":
        conf.update(sasl_mechanism="SCRAM-SHA-256", sasl_username="alice",
                    sasl_password="alice-secret")
    return conf


def _confluent_conf(cluster: Cluster, name: str, cafile: str) -> dict:
    conf = {"bootstrap.servers": cluster.bootstrap_for(name).split(",")[0],
            "security.protocol": name.lower()}
    if name != "PLAINTEXT":
        conf["ssl.ca.location"] = cafile
    if name == "SASL_SSL":
        conf.update({"sasl.mechanism": "PLAIN", "sasl.username": "alice",
                     "sasl.password": "alice-secret"})
    return conf


# ------------------------------------------------------------------ configuration
def test_parse_listeners_with_a_protocol_map_and_advertised_addresses():
    ls = parse_listeners("INTERNAL://127.0.0.1:0,external://0.0.0.0:9094",
                         protocol_map="INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
                         advertised="EXTERNAL://kafka.example:19094",
                         security={"EXTERNAL": ListenerSecurity(sasl=_sasl())})
    assert [(x.name, x.protocol, x.host, x.port) for x in ls] == [
        ("INTERNAL", "PLAINTEXT", "127.0.0.1", 0), ("EXTERNAL", "SASL_PLAINTEXT", "0.0.0.0", 9094)]
    assert ls[1].advertised_host == "kafka.example" and ls[1].advertised_port == 19094
    assert ls[0].advertised_host is None


@pytest.mark.parametrize("kwargs, message", [
    (dict(listeners="PLAINTEXT://:0,PLAINTEXT://:0"), "PLAINTEXT repeats"),
    (dict(listeners="INTERNAL://:0"), "INTERNAL has no security protocol"),
    (dict(listeners="PLAINTEXT://:0,I://:0", protocol_map="I:SSL"),
     "replaces the default map, so add PLAINTEXT:PLAINTEXT to it"),
    (dict(listeners="PLAINTEXT://:9092,SSL://:9092"), "two listeners on one port"),
    (dict(listeners="PLAINTEXT//:9092"), "is not NAME://host:port"),
    (dict(listeners="A://:0", protocol_map="A:TLS"), "unknown protocol 'TLS'"),
    (dict(listeners="SSL://:0"), "SSL, which needs an ssl_context"),
    (dict(listeners="PLAINTEXT://:0", advertised="SSL://h:1"), "SSL is not a listener"),
    (dict(listeners="PLAINTEXT://:0", security={"SSL": None}), "SSL, which is not a listener"),
])
def test_bad_listener_settings_are_refused_naming_the_cause(kwargs, message):
    text = kwargs.pop("listeners")
    with pytest.raises(ValueError, match=message):
        parse_listeners(text, **kwargs)


def test_a_listener_whose_security_does_not_match_its_protocol(certs):
    ctx = server_context(certs.certfile, certs.keyfile)
    with pytest.raises(ValueError, match="PLAINTEXT is PLAINTEXT.*make it SSL"):
        Listener("PLAINTEXT", "PLAINTEXT", security=ListenerSecurity(ssl_context=ctx))
    with pytest.raises(ValueError, match="either listeners= or security="):
        Cluster(1, listeners="PLAINTEXT://127.0.0.1:0", security=ListenerSecurity())
    with pytest.raises(ValueError, match="at least 2 apart"):
        Cluster(2, listeners="PLAINTEXT://127.0.0.1:9092,OTHER://127.0.0.1:9093",
                listener_security_protocol_map="PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT")


# ------------------------------------------------------------------ metadata per listener
@pytest.mark.parametrize("name", NAMES)
def test_metadata_answers_with_the_listener_the_client_came_through(cluster, certs, name):
    want = sorted(cluster.bootstrap_for(name).split(","))
    assert len(want) == 2 and len({*want, *cluster.bootstrap_for("PLAINTEXT").split(",")}) == \
        (2 if name == "PLAINTEXT" else 4)
    with Admin(**_kcodec_conf(cluster, name, certs.cafile)) as admin:
        md = admin.describe_cluster()
    assert sorted(f"{b.host}:{b.port}" for b in md.brokers) == want


def test_every_listener_at_once_with_kcodec_and_confluent_kafka(cluster, certs):
    """Six clients at the same time, two per listener, each producing to and consuming from
    both nodes' partitions (so each follows Metadata to the other node on its listener) and
    committing through a group (FindCoordinator on its listener)."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = f"ls-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, 2, leaders=[0, 1])
    errors: list[BaseException] = []
    results: dict[tuple[str, str], list[bytes]] = {}

    def kcodec_side(name: str) -> None:
        conf = _kcodec_conf(cluster, name, certs.cafile)
        with Producer(**conf) as p:
            for i in range(20):
                p.send(topic, f"k-{name}-{i}".encode(), partition=i % 2)
            p.flush(15)
        with Consumer(group_id=f"g-k-{name}-{topic}", auto_offset_reset="earliest",
                      **conf) as c:
            c.subscribe([topic])
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len([v for v in got if v.startswith(f"k-{name}-".encode())]) < 20 \
                    and time.monotonic() < deadline:
                for recs in c.poll(0.5).values():
                    got += [r.value for r in recs]
            c.commit()
        results[("kcodec", name)] = got

    def confluent_side(name: str) -> None:
        conf = _confluent_conf(cluster, name, certs.cafile)
        p = confluent_kafka.Producer(conf)
        for i in range(20):
            p.produce(topic, f"c-{name}-{i}".encode(), partition=i % 2)
        assert p.flush(20) == 0
        c = confluent_kafka.Consumer({**conf, "group.id": f"g-c-{name}-{topic}",
                                      "auto.offset.reset": "earliest",
                                      "enable.auto.commit": False})
        try:
            c.subscribe([topic])
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len([v for v in got if v.startswith(f"c-{name}-".encode())]) < 20 \
                    and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    got.append(m.value())
            c.commit(asynchronous=False)
        finally:
            c.close()
        results[("confluent", name)] = got

    def guard(fn, name):
        try:
            fn(name)
        except BaseException as exc:   # reported below
            errors.append(exc)

    threads = [threading.Thread(target=guard, args=(fn, n)) for n in NAMES
               for fn in (kcodec_side, confluent_side)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not errors, errors
    for (who, name), got in results.items():
        mine = [v for v in got if v.startswith(f"{who[0]}-{name}-".encode())]
        assert sorted(mine) == sorted(f"{who[0]}-{name}-{i}".encode() for i in range(20)), \
            (who, name)
    assert len(results) == 6
    # the commits landed in the one group coordinator, whichever listener they came through
    with Admin(bootstrap_servers=cluster.bootstrap_for("PLAINTEXT")) as admin:
        for who in ("k", "c"):
            for name in NAMES:
                offs = admin.committed_offsets(f"g-{who}-{name}-{topic}", [topic])
                assert sum(offs.values()) >= 20, (who, name, offs)


def test_plaintext_client_on_the_ssl_listener_fails_fast(cluster):
    from kcodec.client.errors import BrokerNotAvailableError

    t0 = time.monotonic()
    with pytest.raises(BrokerNotAvailableError, match="closed the connection"):
        with Admin(bootstrap_servers=cluster.bootstrap_for("SSL"), api_timeout_ms=3000,
                   request_timeout_ms=2000) as admin:
            admin.describe_cluster()
    assert time.monotonic() - t0 < 10


def test_advertised_listeners_are_what_metadata_reports():
    with Cluster(1, listeners="PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
                 listener_security_protocol_map="PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
                 advertised_listeners="OTHER://localhost:0") as c:
        other = c.bootstrap_for("OTHER")
        assert other.startswith("localhost:")
        with Admin(bootstrap_servers=other, **FAST) as admin:
            md = admin.describe_cluster()
        assert [f"{b.host}:{b.port}" for b in md.brokers] == [other]
        with Admin(bootstrap_servers=c.bootstrap, **FAST) as admin:
            md = admin.describe_cluster()
        assert [f"{b.host}:{b.port}" for b in md.brokers] == [c.bootstrap]
        assert c.bootstrap.startswith("127.0.0.1:")
        # a restart binds the same ports again
        before = c.nodes[0].addresses()
        c.stop_node(0)
        c.restart_node(0)
        assert c.nodes[0].addresses() == before


def test_cli_broker_with_three_listeners(certs, tmp_path):
    users = tmp_path / "users"
    users.write_text("alice:alice-secret\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kcodec", "broker", "--json",
         "--listeners", "PLAINTEXT://127.0.0.1:0,SSL://localhost:0,SASL_SSL://localhost:0",
         "--ssl-certfile", certs.certfile, "--ssl-keyfile", certs.keyfile,
         "--sasl-users", str(users)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        info = json.loads(proc.stdout.readline())
        assert set(info["listeners"]) == set(NAMES)
        assert info["bootstrap"] == info["listeners"]["PLAINTEXT"]
        for name in NAMES:
            conf: dict = {"bootstrap_servers": info["listeners"][name], **FAST}
            if name != "PLAINTEXT":
                conf.update(security_protocol=name, ssl_cafile=certs.cafile)
            if name == "SASL_SSL":
                conf.update(sasl_mechanism="PLAIN", sasl_username="alice",
                            sasl_password="alice-secret")
            with Admin(**conf) as admin:
                md = admin.describe_cluster()
            assert [f"{b.host}:{b.port}" for b in md.brokers] == [info["listeners"][name]]
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0


def test_cli_broker_refuses_a_listener_it_cannot_secure(tmp_path):
    out = subprocess.run([sys.executable, "-m", "kcodec", "broker",
                          "--listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "SASL_PLAINTEXT: give --sasl-users" in out.stderr


@pytest.mark.parametrize("address, cause", [
    ("127.0.0.1:{taken}", "Address already in use: the port is taken"),
    ("nosuchhost.invalid:0", "unknown host 'nosuchhost.invalid'"),
    ("192.0.2.1:0", "no network interface of this machine has that address"),
])
def test_a_listener_that_cannot_bind_names_its_address_and_what_to_do(address, cause):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = address.format(taken=taken.getsockname()[1])
        c = Cluster(1, listeners=f"PLAINTEXT://127.0.0.1:0,INTERNAL://{address}",
                    listener_security_protocol_map="PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT")
        with pytest.raises(OSError, match=f"cannot listen on {address} for listener INTERNAL "
                                          f"of node 0: .*{cause}"):
            c.start()
        c.stop()


def test_cli_broker_on_a_port_in_use_says_so_and_exits(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "kcodec", "broker", "--port", str(port)],
                             capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and not out.stdout
    assert f"cannot listen on 127.0.0.1:{port} for listener PLAINTEXT of node 0" in out.stderr
    assert "choose another port" in out.stderr and "Traceback" not in out.stderr


def test_an_ipv6_listener_is_printed_as_clients_take_it():
    import socket

    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    with Cluster(1, listeners="PLAINTEXT://[::1]:0") as c:
        assert c.bootstrap.startswith("[::1]:")
        with Producer(bootstrap_servers=c.bootstrap) as p:
            p.send("v6", b"x").result(10)
        with Admin(bootstrap_servers=c.bootstrap) as admin:
            assert "v6" in admin.list_topics()
