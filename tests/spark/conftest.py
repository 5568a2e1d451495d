"""The Spark standalone cluster the cluster tests share (a master and two workers; one for
the whole session, so two modules never run two clusters on the machine at once: under
pytest-xdist both cluster modules go to one worker, tests/support/module_costs.py's
SAME_WORKER)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    pytest.importorskip("pyspark", reason="kcodec.spark needs pyspark (the spark/test extras)")
    from kcodec.cli.pipeline import java_problem
    from tests.support.spark_cluster import StandaloneCluster

    if java_problem() is not None:
        pytest.fail("Spark needs Java 17+ (the slow step runs the cluster tests)")
    with StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2) as c:
        yield c
