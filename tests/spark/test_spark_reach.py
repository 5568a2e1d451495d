"""Errors that name the cluster cause (kcodec/spark/reach.py, kcodec/spark/logsource.py):
an advertised address unreachable while the bootstrap server answers, no bootstrap server
at all, a log segment missing on the executor that reads it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="kcodec.spark needs pyspark (the spark/test extras)")
pytest.importorskip("pyarrow")

from kcodec.broker.cluster import Cluster  # noqa: E402
from kcodec.client.errors import BrokerNotAvailableError  # noqa: E402
from kcodec.spark import _kafka, reach  # noqa: E402
from kcodec.spark.logsource import missing_here  # noqa: E402
from kcodec.spark.options import parse_source  # noqa: E402
from kcodec.testing import free_port  # noqa: E402


def test_an_unreachable_advertised_address_is_named_with_the_listener_setting() -> None:
    port, dead = free_port(), free_port()      # nothing listens on dead
    bootstrap = f"127.0.0.1:{port}"
    with Cluster(1, listeners=f"PLAINTEXT://{bootstrap}",
                 advertised_listeners=f"PLAINTEXT://127.0.0.1:{dead}") as c:
        c.create_topic("t", 2)
        why = reach.diagnose(bootstrap, {}, reach.DRIVER)
        assert why is not None
        assert f"the bootstrap server {bootstrap} answers" in why
        assert f"127.0.0.1:{dead}" in why and "advertised.listeners" in why
        assert "every machine of the cluster" in why
        # planning a batch query: the client's bare error becomes this one, and fast
        opts = parse_source({"kafka.bootstrap.servers": bootstrap, "subscribe": "t",
                             "kafka.default.api.timeout.ms": "3000",
                             "kafka.request.timeout.ms": "2000"}, streaming=False)
        t0 = time.monotonic()
        with pytest.raises(BrokerNotAvailableError) as e:
            _kafka.plan_ranges(opts)
        assert "advertised.listeners" in str(e.value) and f"127.0.0.1:{dead}" in str(e.value)
        assert e.value.__cause__ is not None      # the client's own error follows
        assert time.monotonic() - t0 < 40


def test_every_address_answering_means_no_diagnosis_and_none_answering_is_named() -> None:
    with Cluster(1) as c:
        assert reach.diagnose(c.bootstrap, {}, reach.EXECUTOR) is None
    dead = free_port()
    why = reach.diagnose(f"127.0.0.1:{dead}", {}, reach.EXECUTOR)
    assert why is not None and "no bootstrap server can be reached" in why
    assert reach.EXECUTOR in why and f"127.0.0.1:{dead}" in why


def test_named_cause_leaves_other_errors_alone() -> None:
    with pytest.raises(ValueError, match="other"), \
            reach.named_cause("127.0.0.1:1", {}, reach.DRIVER):
        raise ValueError("other")


def test_a_segment_missing_on_the_executor_names_the_shared_path_cause() -> None:
    text = missing_here("/data/kafka/t-0/00000000000000000000.log", "driver-host")
    assert "/data/kafka/t-0/00000000000000000000.log: no such file on this Spark executor" \
        in text
    assert "on driver-host when the query was planned" in text
    assert "every worker must see the same path" in text


def test_a_log_reader_task_whose_segment_is_gone_names_the_shared_path_cause(tmp_path
                                                                            ) -> None:
    import pickle

    from kcodec.spark.logsource import LogReader
    from tests.support.segments import simple_batches, write_segment

    tp = tmp_path / "orders-0"
    tp.mkdir()
    write_segment(tp, 0, simple_batches())
    reader = LogReader([str(tp)], False, False, True, True)
    parts = reader.partitions()
    assert len(parts) == 1
    on_executor = pickle.loads(pickle.dumps(reader))     # as Spark ships it
    assert len(list(on_executor.read(parts[0]))) >= 1
    seg = parts[0].value.path
    Path(seg).unlink()                                   # not on this "executor"
    with pytest.raises(FileNotFoundError) as e:
        list(on_executor.read(parts[0]))
    assert f"{seg}: no such file on this Spark executor" in str(e.value)
    assert "every worker must see the same path" in str(e.value)


def test_a_sink_task_fails_when_any_batch_is_refused() -> None:
    """Every batch's acknowledgement is checked before the task reports success: one the
    broker refuses fails the task (Spark retries it) instead of counting as written."""
    import pyarrow as pa

    from kcodec.spark.options import parse_sink
    from kcodec.spark.sink import write_batches

    with Cluster(1, num_partitions=2) as c:
        c.create_topic("out", 2)
        opts = parse_sink({"kafka.bootstrap.servers": c.bootstrap, "topic": "out",
                           "kafka.batch.size": "1024"})
        rb = pa.RecordBatch.from_pydict({"value": pa.array([b"x" * 100] * 40, pa.binary()),
                                         "partition": pa.array([0, 1] * 20, pa.int32())})
        ok = write_batches(opts, iter([rb]))
        assert ok.records == 40 and ok.last_offsets == {("out", 0): 19, ("out", 1): 19}
        c.push_errors("Produce", [0, 87])      # the second produce: INVALID_RECORD
        with pytest.raises(Exception, match="INVALID_RECORD|invalid record"):
            write_batches(opts, iter([rb]))
