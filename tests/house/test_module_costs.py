"""The order pytest-xdist hands modules out in (tests/support/module_costs.py): costliest
first by the measured worker-seconds, folder defaults for modules not measured, and the
figures read off pytest's ``--durations=0`` lines."""

from __future__ import annotations

import json

from tests.support import module_costs as mc


def test_modules_go_costliest_first_and_unmeasured_ones_by_folder() -> None:
    costs = {"tests/spark/test_a.py": 400.0, "tests/broker/test_b.py": 90.0,
             "tests/codec/test_c.py": 0.5}
    modules = ["tests/codec/test_c.py", "tests/codec/test_new.py", "tests/spark/test_new.py",
               "tests/broker/test_b.py", "tests/spark/test_a.py", "tests/codec/test_new2.py"]
    assert mc.order(modules, costs) == [
        "tests/spark/test_a.py", "tests/broker/test_b.py",
        "tests/spark/test_new.py",                       # a heavy folder's default, 60 s
        "tests/codec/test_new.py", "tests/codec/test_new2.py",   # 1 s each, in given order
        "tests/codec/test_c.py"]


def test_costs_are_summed_per_module_from_durations_lines() -> None:
    lines = [
        "============================= slowest durations ==============================",
        "226.10s call     tests/spark/test_spark_eos_cluster.py::test_exactly_once_through_four_faults",
        "20.50s setup    tests/spark/test_spark_eos_cluster.py::test_exactly_once_through_four_faults",
        "3.00s call     tests/codec/test_varint.py::test_x[cython-1::2]",
        "0.25s teardown tests/codec/test_varint.py::test_y",
        "(1234 durations < 0.005s hidden.  Use -vv to show these durations.)",
        "FAILED tests/codec/test_varint.py::test_z - 2.00s",
    ]
    assert mc.from_durations(lines) == {"tests/spark/test_spark_eos_cluster.py": 246.6,
                                        "tests/codec/test_varint.py": 3.25}


def test_the_tool_writes_the_costs_file(tmp_path, monkeypatch) -> None:
    log = tmp_path / "ci.log"
    log.write_text("12.00s call     tests/cli/test_cli.py::test_a\n"
                   "1.00s call     tests/cli/test_cli.py::test_b\n")
    out = tmp_path / "module_costs.json"
    monkeypatch.setattr(mc, "COSTS_FILE", out)
    assert mc.main([str(log)]) == 0
    assert json.loads(out.read_text())["modules"] == {"tests/cli/test_cli.py": 13.0}
    assert mc.load(out) == {"tests/cli/test_cli.py": 13.0}
    empty = tmp_path / "empty.log"
    empty.write_text("nothing\n")
    assert mc.main([str(empty)]) == 1
    assert mc.load(tmp_path / "absent.json") == {}


def test_the_committed_costs_file_reads() -> None:
    costs = mc.load()
    assert costs, "tests/support/module_costs.json is missing or empty"
    assert all(k.startswith("tests/") and k.endswith(".py") and v >= 0 for k, v in costs.items())


def test_the_spark_cluster_modules_are_one_unit_of_work() -> None:
    assert mc.unit("tests/spark/test_spark_eos_cluster.py") == "tests/spark/test_spark_cluster.py"
    assert mc.unit("tests/spark/test_spark_cluster.py") == "tests/spark/test_spark_cluster.py"
    assert mc.unit("tests/codec/test_varint.py") == "tests/codec/test_varint.py"
    for a, b in mc.SAME_WORKER.items():
        assert (mc.ROOT / a).is_file() and (mc.ROOT / b).is_file(), (a, b)


def test_the_loadfile_scheduler_hands_the_shared_modules_out_as_one_unit() -> None:
    import pytest

    pytest.importorskip("xdist")
    from tests.conftest import pytest_xdist_make_scheduler

    class Config:                  # what the scheduler reads of a -n 2 --dist DIST run
        def __init__(self, dist: str):
            self.values = {"dist": dist, "tx": ["2*popen"]}

        def getvalue(self, name: str):
            return self.values[name]

    assert pytest_xdist_make_scheduler(Config("load"), None) is None     # xdist's own then
    sched = pytest_xdist_make_scheduler(Config("loadfile"), None)
    assert sched._split_scope("tests/spark/test_spark_eos_cluster.py::test_x") == \
        sched._split_scope("tests/spark/test_spark_cluster.py::test_y") == \
        "tests/spark/test_spark_cluster.py"
    assert sched._split_scope("tests/codec/test_varint.py::test_z[a::b]") == \
        "tests/codec/test_varint.py"
