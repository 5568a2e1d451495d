"""The cost of TLS and of transactions, kcodec's client vs confluent-kafka, in one run.

    S-produce   produce N records (16-byte key, 100-byte value, lz4) to a 4-partition topic,
                acks=all, idempotent, waiting for every acknowledgement: PLAINTEXT straight
                to Tansu vs SSL through stunnel in front of the same Tansu
    S-consume   consume them from the beginning (object API, key and value touched)
    T-produce   the same N records idempotent vs transactional (one transaction per
                10,000 records, committed), on noida-db (Tansu has no transactions)

The row "kcodec cython" is kcodec's PLAINTEXT (S-*) or idempotent (T-) run; every other
row's ratio is its slowdown against that. TLS cost of a client = its SSL row / its
PLAINTEXT row. N = KCODEC_BENCH_S_RECORDS (default 200,000). SASL_SSL is not measured
here: the only SASL peer today is the tests' Python front layer, whose own cost would be
measured; it is measured on kcodec's broker once its listeners exist.
"""

from __future__ import annotations

import os
import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
pytest.importorskip("trustme")

from kcodec.client import Admin, Consumer, Producer, TopicPartition  # noqa: E402

N = int(os.environ.get("KCODEC_BENCH_S_RECORDS", "200000"))
PARTITIONS = 4
TXN_EVERY = 10_000
KEYS = [b"%016x" % (i * 0x9E3779B97F4A7C15 % (1 << 64)) for i in range(N)]
VALUE = (b'{"event":"click","user":"u00042","page":"/a/b/c","tag":"' + b"7" * 100)[:100]


@pytest.fixture(scope="module")
def tls():
    """(plaintext bootstrap, TLS bootstrap, cafile) of one Tansu, the TLS side via stunnel."""
    from tests.support.security_util import (
        Certs,
        Stunnel,
        TansuAdvertising,
        free_port,
        stunnel_binary,
    )

    if stunnel_binary() is None:
        pytest.skip("stunnel is not installed (apt-get install stunnel4)")
    certs = Certs()
    port = free_port()
    # Tansu advertises the stunnel port, so the plaintext side may only bootstrap there;
    # a second Tansu serves the plaintext runs with its own advertised address
    from kcodec.testing.tansu import Tansu

    with TansuAdvertising(port) as behind, Tansu() as plain:
        st = Stunnel(port, behind.port, certs).start()
        try:
            yield plain.bootstrap, f"localhost:{port}", certs.cafile
        finally:
            st.stop()
            certs.cleanup()


def _sec(kind: str, cafile: str) -> dict:
    return {} if kind == "PLAINTEXT" else {"security_protocol": "SSL", "ssl_cafile": cafile}


def _csec(kind: str, cafile: str) -> dict:
    return {} if kind == "PLAINTEXT" else {"security.protocol": "ssl", "ssl.ca.location": cafile}


def _topic(bootstrap: str, sec: dict) -> str:
    name = f"bench-{uuid.uuid4().hex[:10]}"
    with Admin(bootstrap_servers=bootstrap, **sec) as a:
        assert a.create_topics([name], num_partitions=PARTITIONS)[name] is None
    return name


def kcodec_produce(bootstrap: str, topic: str, sec: dict, txn: bool = False) -> None:
    extra = {"transactional_id": f"bench-{topic}"} if txn else {}
    with Producer(bootstrap_servers=bootstrap, compression_type="lz4", compression_level=1,
                  linger_ms=5, batch_size=256 * 1024, **sec, **extra) as p:
        send = p.send
        if not txn:
            for k in KEYS:
                send(topic, VALUE, k)
            p.flush()
            return
        p.init_transactions()
        for start in range(0, N, TXN_EVERY):
            p.begin_transaction()
            for k in KEYS[start:start + TXN_EVERY]:
                send(topic, VALUE, k)
            p.commit_transaction()


def confluent_produce(bootstrap: str, topic: str, sec: dict, txn: bool = False) -> None:
    conf = {"bootstrap.servers": bootstrap, "compression.type": "lz4", "compression.level": 1,
            "linger.ms": 5, "acks": "all", "enable.idempotence": True,
            "queue.buffering.max.messages": 2_000_000, **sec}
    if txn:
        conf["transactional.id"] = f"bench-c-{topic}"
    p = confluent_kafka.Producer(conf)
    produce = p.produce

    def send_all(keys: list[bytes]) -> None:
        for k in keys:
            try:
                produce(topic, VALUE, k)
            except BufferError:
                p.poll(0.05)
                produce(topic, VALUE, k)
    if not txn:
        send_all(KEYS)
        assert p.flush(120) == 0
        return
    p.init_transactions(30)
    for start in range(0, N, TXN_EVERY):
        p.begin_transaction()
        send_all(KEYS[start:start + TXN_EVERY])
        p.commit_transaction(60)


def kcodec_consume(bootstrap: str, topic: str, sec: dict) -> int:
    n = 0
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                  fetch_max_wait_ms=100, max_poll_records=100_000, **sec) as c:
        c.assign([TopicPartition(topic, i) for i in range(PARTITIONS)])
        while n < N:
            for recs in c.poll(5.0).values():
                for r in recs:
                    r.key  # noqa: B018 (touch the field)
                    r.value  # noqa: B018 (touch the field)
                n += len(recs)
    return n


def confluent_consume(bootstrap: str, topic: str, sec: dict) -> int:
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}",
                                  "enable.auto.commit": False, "fetch.wait.max.ms": 100, **sec})
    c.assign([confluent_kafka.TopicPartition(topic, i, confluent_kafka.OFFSET_BEGINNING)
              for i in range(PARTITIONS)])
    n = 0
    while n < N:
        for m in c.consume(min(100_000, N - n), 5.0):
            m.key()
            m.value()
            n += 1
    c.close()
    return n


ROWS = [("kcodec cython", "kcodec", "PLAINTEXT"), ("kcodec SSL", "kcodec", "SSL"),
        ("confluent-kafka PLAINTEXT", "confluent", "PLAINTEXT"),
        ("confluent-kafka SSL", "confluent", "SSL")]


@pytest.mark.parametrize("row,who,kind", ROWS)
def test_s_produce(benchmark, ratios, tls, row, who, kind) -> None:
    plain, secure, cafile = tls
    bootstrap = plain if kind == "PLAINTEXT" else secure
    sec = _sec(kind, cafile) if who == "kcodec" else _csec(kind, cafile)
    fn = kcodec_produce if who == "kcodec" else confluent_produce

    def setup():
        return (bootstrap, _topic(bootstrap, _sec(kind, cafile)), sec), {}
    benchmark.pedantic(fn, setup=setup, rounds=3, iterations=1)
    ratios.add(f"S-produce lz4 ({N} records)", row, benchmark, amount=N, unit="msg")


@pytest.fixture(scope="module")
def filled(tls):
    plain, secure, cafile = tls
    topics = {}
    for kind, bootstrap in (("PLAINTEXT", plain), ("SSL", secure)):
        topics[kind] = _topic(bootstrap, _sec(kind, cafile))
        confluent_produce(bootstrap, topics[kind], _csec(kind, cafile))
    return topics


@pytest.mark.parametrize("row,who,kind", ROWS)
def test_s_consume(benchmark, ratios, tls, filled, row, who, kind) -> None:
    plain, secure, cafile = tls
    bootstrap = plain if kind == "PLAINTEXT" else secure
    sec = _sec(kind, cafile) if who == "kcodec" else _csec(kind, cafile)
    fn = kcodec_consume if who == "kcodec" else confluent_consume
    got = benchmark.pedantic(fn, args=(bootstrap, filled[kind], sec), rounds=3, iterations=1)
    assert got == N
    ratios.add(f"S-consume ({N} records)", row, benchmark, amount=N, unit="msg")


@pytest.fixture(scope="module")
def noida():
    from kcodec.testing.noida import Noida, noida_binary

    if noida_binary() is None:
        pytest.skip("noida-db is not installed")
    with Noida() as n:
        yield n.bootstrap


@pytest.mark.parametrize("row,who,txn", [("kcodec cython", "kcodec", False),
                                         ("kcodec transactional", "kcodec", True),
                                         ("confluent-kafka idempotent", "confluent", False),
                                         ("confluent-kafka transactional", "confluent", True)])
def test_t_produce(benchmark, ratios, noida, row, who, txn) -> None:
    fn = kcodec_produce if who == "kcodec" else confluent_produce

    def setup():
        return (noida, _topic(noida, {}), {}, txn), {}
    benchmark.pedantic(fn, setup=setup, rounds=3, iterations=1)
    ratios.add(f"T-produce lz4 ({N} records, {TXN_EVERY} per transaction)", row, benchmark,
               amount=N, unit="msg")


# --------------------------------------------------------------- on kcodec's broker
class _BrokerProcess:
    """``kcodec broker`` in its own process, PLAINTEXT, SSL or SASL_SSL (SCRAM-SHA-512)."""

    def __init__(self, kind: str, certs) -> None:
        import json
        import subprocess
        import sys
        import tempfile

        self.dir = tempfile.TemporaryDirectory(prefix="kcodec-bench-sec-")
        args = [sys.executable, "-m", "kcodec", "broker", "--json", "--host", "localhost"]
        if kind in ("SSL", "SASL_SSL"):
            args += ["--ssl-certfile", certs.certfile, "--ssl-keyfile", certs.keyfile]
        if kind == "SASL_SSL":
            users = os.path.join(self.dir.name, "users")
            with open(users, "w") as f:
                f.write("bench:bench-secret\n")
            args += ["--sasl-users", users, "--sasl-mechanisms", "SCRAM-SHA-512"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        self.bootstrap = json.loads(self.proc.stdout.readline())["bootstrap"]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.dir.cleanup()


KINDS = ("PLAINTEXT", "SSL", "SASL_SSL")


@pytest.fixture(scope="module")
def kbrokers():
    from tests.support.security_util import Certs

    certs = Certs()
    started = {k: _BrokerProcess(k, certs) for k in KINDS}
    yield started, certs.cafile
    for b in started.values():
        b.stop()
    certs.cleanup()


def _ksec(kind: str, cafile: str) -> dict:
    sec = _sec(kind, cafile) if kind != "SASL_SSL" else {
        "security_protocol": "SASL_SSL", "ssl_cafile": cafile, "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": "bench", "sasl_password": "bench-secret"}
    return sec


def _kcsec(kind: str, cafile: str) -> dict:
    if kind != "SASL_SSL":
        return _csec(kind, cafile)
    return {"security.protocol": "sasl_ssl", "ssl.ca.location": cafile,
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench",
            "sasl.password": "bench-secret"}


K_ROWS = [("kcodec cython" if k == "PLAINTEXT" else f"kcodec {k}", "kcodec", k) for k in KINDS] + \
    [(f"confluent-kafka {k}", "confluent", k) for k in KINDS]


@pytest.mark.parametrize("row,who,kind", K_ROWS)
def test_k_produce(benchmark, ratios, kbrokers, row, who, kind) -> None:
    started, cafile = kbrokers
    bootstrap = started[kind].bootstrap
    sec = _ksec(kind, cafile) if who == "kcodec" else _kcsec(kind, cafile)
    fn = kcodec_produce if who == "kcodec" else confluent_produce

    def setup():
        return (bootstrap, _topic(bootstrap, _ksec(kind, cafile)), sec), {}
    benchmark.pedantic(fn, setup=setup, rounds=3, iterations=1)
    ratios.add(f"K-produce lz4 on kcodec's broker ({N} records)", row, benchmark, amount=N,
               unit="msg")


@pytest.fixture(scope="module")
def kfilled(kbrokers):
    started, cafile = kbrokers
    topics = {}
    for kind in KINDS:
        bootstrap = started[kind].bootstrap
        topics[kind] = _topic(bootstrap, _ksec(kind, cafile))
        confluent_produce(bootstrap, topics[kind], _kcsec(kind, cafile))
    return topics


@pytest.mark.parametrize("row,who,kind", K_ROWS)
def test_k_consume(benchmark, ratios, kbrokers, kfilled, row, who, kind) -> None:
    started, cafile = kbrokers
    sec = _ksec(kind, cafile) if who == "kcodec" else _kcsec(kind, cafile)
    fn = kcodec_consume if who == "kcodec" else confluent_consume
    got = benchmark.pedantic(fn, args=(started[kind].bootstrap, kfilled[kind], sec), rounds=3,
                             iterations=1)
    assert got == N
    ratios.add(f"K-consume on kcodec's broker ({N} records)", row, benchmark, amount=N,
               unit="msg")
