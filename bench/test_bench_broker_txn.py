"""Transactional vs idempotent produce on kcodec's broker, kcodec's client vs confluent-kafka.

    X-produce   produce N records (16-byte key, 100-byte value, lz4) to a 4-partition topic,
                acks=all, idempotent vs transactional (one transaction per 10,000 records,
                committed), against ``kcodec broker`` (PLAINTEXT) in its own process, so
                the broker's transaction coordinator (AddPartitionsToTxn, EndTxn, markers)
                is on the path

The row "kcodec cython" is kcodec's idempotent run; every other row's ratio is its slowdown
against it. Transaction cost of a client = its transactional row / its idempotent row.
N = KCODEC_BENCH_S_RECORDS (default 200,000; the numbers in bench/README.md use 50,000).
"""

from __future__ import annotations

import pytest

pytest.importorskip("confluent_kafka")

from bench.test_bench_security import (  # noqa: E402
    TXN_EVERY,
    N,
    _BrokerProcess,
    _topic,
    confluent_produce,
    kcodec_produce,
)


@pytest.fixture(scope="module")
def kbroker():
    b = _BrokerProcess("PLAINTEXT", None)
    yield b.bootstrap
    b.stop()


@pytest.mark.parametrize("row,who,txn", [("kcodec cython", "kcodec", False),
                                         ("kcodec transactional", "kcodec", True),
                                         ("confluent-kafka idempotent", "confluent", False),
                                         ("confluent-kafka transactional", "confluent", True)])
def test_x_produce(benchmark, ratios, kbroker, row, who, txn) -> None:
    fn = kcodec_produce if who == "kcodec" else confluent_produce

    def setup():
        return (kbroker, _topic(kbroker, {}), {}, txn), {}
    benchmark.pedantic(fn, setup=setup, rounds=3, iterations=1)
    ratios.add(f"X-produce lz4 on kcodec's broker ({N} records, {TXN_EVERY} per transaction)",
               row, benchmark, amount=N, unit="msg")
