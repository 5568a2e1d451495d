"""The outside reference data (tests/support/reference.py) as a fresh clone meets it: the
suite's conftest and support run in a copy of the checkout in an empty directory, on a probe
test file, with the data absent, required, present beside the copy, incomplete, or given by
the variables."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO

PROBE = '''
import pytest

from tests.support.reference import specs_dir
from tests.support.segments import TOPIC_LOG, reference


@pytest.mark.reference
def test_segment():
    assert reference(TOPIC_LOG).read_bytes() == b"segment"


@pytest.mark.reference
def test_other_segment():
    assert reference(TOPIC_LOG).is_file()


@pytest.mark.reference("specs")
def test_specs():
    assert (specs_dir() / "ProduceRequest.json").read_text() == "{}"


def test_plain():
    pass
'''

UNMARKED = '''
from tests.support.segments import META_LOG, reference


def test_reads_without_the_marker():
    reference(META_LOG)
'''

VARIABLES = ("KCODEC_REFERENCE_DIR", "KCODEC_SPECS", "KCODEC_REQUIRE_REFERENCE")


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A copy of what the suite's set-up needs, at tmp/x/kcodec: nothing beside it."""
    root = tmp_path / "x" / "kcodec"
    (root / "tests").mkdir(parents=True)
    shutil.copy(REPO / "pyproject.toml", root)
    for name in ("__init__.py", "conftest.py"):
        shutil.copy(REPO / "tests" / name, root / "tests")
    shutil.copytree(REPO / "tests" / "support", root / "tests" / "support",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (root / "tests" / "test_probe.py").write_text(PROBE)
    return root


def make_reference(where: Path, segment: bool = True) -> Path:
    ref = where / "reference"
    (ref / "segments" / "TestTopicPatient-0").mkdir(parents=True)
    if segment:
        (ref / "segments" / "TestTopicPatient-0" / "00000000000000000000.log").write_bytes(
            b"segment")
    (ref / "kafka-message-specs").mkdir()
    (ref / "kafka-message-specs" / "ProduceRequest.json").write_text("{}")
    return ref


def run(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    environ.update(env)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           "tests/test_probe.py", *args],
                          cwd=root, env=environ, capture_output=True, text=True, timeout=120)


def test_absent_reference_data_skips_with_one_line_that_says_how_to_run_them(clone) -> None:
    r = run(clone)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed, 3 skipped" in r.stdout
    lines = [line for line in r.stdout.splitlines() if "outside reference data" in line]
    # -ra's one line for the three skips, and the summary
    assert len(lines) == 2, r.stdout
    assert lines[0].startswith("SKIPPED [3] tests/conftest.py")
    summary = lines[1]
    assert summary.startswith("3 tests needed the outside reference data and were not run")
    assert str(clone.parent / "shared" / "reference") in summary
    assert "KCODEC_REFERENCE_DIR" in summary and "KCODEC_SPECS" in summary


def test_required_reference_data_fails_when_absent(clone) -> None:
    r = run(clone, KCODEC_REQUIRE_REFERENCE="1")
    assert r.returncode == 1
    assert "3 failed, 1 passed" in r.stdout
    assert "KCODEC_REQUIRE_REFERENCE is set but the reference data is missing" in r.stdout
    assert "needed the outside reference data" not in r.stdout


def test_reference_data_beside_the_checkout_runs_and_a_missing_file_fails(clone) -> None:
    make_reference(clone.parent / "shared")
    r = run(clone, KCODEC_REQUIRE_REFERENCE="1")
    assert r.returncode == 0 and "4 passed" in r.stdout, r.stdout
    # a worktree in a folder of worktrees: shared/ beside that folder
    moved = clone.parent.parent / "shared"
    shutil.move(str(clone.parent / "shared"), moved)
    assert run(clone).stdout.count("4 passed") == 1
    (moved / "reference" / "segments" / "TestTopicPatient-0" / "00000000000000000000.log"
     ).unlink()
    r = run(clone)
    assert r.returncode == 1 and "2 failed, 2 passed" in r.stdout, r.stdout
    assert "reference file segments/TestTopicPatient-0/00000000000000000000.log not found" \
        in r.stdout


def test_the_variables_choose_the_data(clone, tmp_path) -> None:
    ref = make_reference(tmp_path / "elsewhere")
    r = run(clone, KCODEC_REFERENCE_DIR=str(ref))
    assert r.returncode == 0 and "4 passed" in r.stdout, r.stdout
    # the specs alone: the spec check runs, the segment tests are skipped
    r = run(clone, KCODEC_SPECS=str(ref / "kafka-message-specs"))
    assert r.returncode == 0 and "2 passed, 2 skipped" in r.stdout, r.stdout
    assert "2 tests needed the outside reference data" in r.stdout
    # a variable naming nothing is a mistake to report, not a reason to skip quietly
    r = run(clone, KCODEC_REFERENCE_DIR=str(tmp_path / "typo"))
    assert r.returncode == 1 and f"KCODEC_REFERENCE_DIR={tmp_path / 'typo'} is not a directory" \
        in r.stdout


def test_a_test_that_reads_the_data_without_the_marker_fails_where_it_is_absent(clone) -> None:
    (clone / "tests" / "test_probe.py").write_text(UNMARKED)
    r = run(clone)
    assert r.returncode == 1
    assert "reads the outside reference data (segments) but is not marked" in r.stdout
