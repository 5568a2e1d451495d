"""Where `kcodec pipeline` runs Spark (kcodec/cli/pipeline.py spark_target): its own
--master/--remote first, then what spark-submit or the environment set, only then
local[2]. No Spark started."""

from __future__ import annotations

import pytest

from kcodec.cli._client import UsageError
from kcodec.cli.pipeline import spark_target

ENV = ("PYSPARK_GATEWAY_PORT", "SPARK_REMOTE", "MASTER", "PYSPARK_SUBMIT_ARGS",
       "SPARK_CONF_DIR", "SPARK_HOME")


@pytest.fixture
def clean(monkeypatch, tmp_path):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))     # no spark-defaults.conf
    return monkeypatch


def t(master=None, remote=None):
    x = spark_target(master, remote)
    return x.kind, x.url, x.source


def test_arguments_win(clean) -> None:
    clean.setenv("MASTER", "spark://elsewhere:7077")
    clean.setenv("PYSPARK_GATEWAY_PORT", "4242")
    assert t("spark://h:7077") == ("master", "spark://h:7077", "--master")
    assert t(remote="sc://h:15002") == ("remote", "sc://h:15002", "--remote")
    with pytest.raises(UsageError, match="give it to --remote"):
        t("sc://h:15002")
    with pytest.raises(UsageError, match="sc://HOST:PORT"):
        t(remote="spark://h:7077")


def test_spark_submit_and_the_environment_then_local(clean, tmp_path) -> None:
    assert t() == ("master", "local[2]", "the default")
    assert spark_target(None, None).local
    (tmp_path / "spark-defaults.conf").write_text("# mine\nspark.master   spark://d:7077\n")
    assert t() == ("inherited", "spark://d:7077", str(tmp_path / "spark-defaults.conf"))
    clean.setenv("PYSPARK_SUBMIT_ARGS", "--master yarn pyspark-shell")
    assert t() == ("inherited", "yarn", "PYSPARK_SUBMIT_ARGS")
    clean.setenv("MASTER", "local[4]")
    assert t() == ("inherited", "local[4]", "MASTER")
    assert spark_target(None, None).local
    clean.setenv("SPARK_REMOTE", "sc://c:15002")
    assert t() == ("remote", "sc://c:15002", "SPARK_REMOTE")
    # run by spark-submit: its master (whatever --master said) is already the session's
    clean.setenv("PYSPARK_GATEWAY_PORT", "4242")
    assert t() == ("inherited", None, "spark-submit")
    assert not spark_target(None, None).local


def test_progress_rows_from_classic_and_connect_progress() -> None:
    from kcodec.cli.pipeline import _rows_and_rate

    assert _rows_and_rate({"numInputRows": 7, "processedRowsPerSecond": 3.5}) == (7, 3.5)

    class Source:
        numInputRows = 4

    class ConnectProgress:          # Spark Connect: the totals only per source
        numInputRows = None
        processedRowsPerSecond = None
        sources = [Source(), Source()]

    assert _rows_and_rate(ConnectProgress()) == (8, 0.0)
    assert _rows_and_rate({"numInputRows": None, "sources": [{"numInputRows": 2}]}) == (2, 0.0)
