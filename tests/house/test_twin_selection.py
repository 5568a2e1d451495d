"""The pure-twin pass of CI runs the tests marked ``twins`` (tests/support/twin_selection.py):
that selection reaches every twin on this checkout, the check finds a planted gap, and the
marker lands on exactly the tests of the listed folders."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.support import REPO
from tests.support.twin_rules import twin_names
from tests.support.twin_selection import TWIN_DIRS, in_twin_dirs, selected, unreached

pytestmark = pytest.mark.twins     # the pure pass runs the check of its own selection


def _checkout() -> None:
    if not (REPO / "kcodec" / "_py").is_dir() or not (REPO / "setup.py").exists():
        pytest.skip("runs from a checkout (the sources are not beside the tests here)")


def test_the_pure_pass_reaches_every_twin() -> None:
    _checkout()
    assert twin_names(REPO), "no twin found: the check would pass on nothing"
    assert unreached(REPO) == [], (
        "no test of the pure-twin pass reaches these twins: mark a test that goes through "
        "their face `pytestmark = pytest.mark.twins`, or add its folder to TWIN_DIRS")


def test_dropping_the_only_folder_that_reaches_a_twin_is_caught() -> None:
    _checkout()
    # only the compat tests go through the peer adapters' twin
    assert unreached(REPO, tuple(d for d in TWIN_DIRS if d != "compat")) == ["peer"]


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text), encoding="utf-8")


FACE = """\
    from kcodec._impl import IMPLEMENTATION

    if IMPLEMENTATION == "cython":
        from kcodec._cy.{0} import f
    else:
        from kcodec._py.{0} import f
"""


def test_a_twin_no_selected_test_reaches_is_named(tmp_path: Path) -> None:
    _write(tmp_path, {
        "kcodec/__init__.py": "", "kcodec/_impl.py": "IMPLEMENTATION = 'python'\n",
        "kcodec/_py/__init__.py": "",
        "kcodec/_py/alpha.py": "from kcodec._py.gamma import g\ndef f(): return g()\n",
        "kcodec/_py/beta.py": "def f(): pass\n",
        "kcodec/_py/gamma.py": "def g(): pass\n",
        "kcodec/alpha.py": FACE.format("alpha"), "kcodec/beta.py": FACE.format("beta"),
        "kcodec/user.py": "def use():\n    from kcodec.beta import f\n    return f()\n",
        "tests/codec/test_alpha.py": "from kcodec.alpha import f\n",
        "tests/other/test_user.py": "from kcodec.user import use\n",
    })
    # alpha through its face, gamma through alpha's twin; beta only from an unselected test
    assert unreached(tmp_path, ("codec",)) == ["beta"]
    # a function-level import counts: the user module's use() reaches beta
    assert unreached(tmp_path, ("codec", "other")) == []
    # a module may mark itself
    _write(tmp_path, {"tests/other/test_user.py": """\
        import pytest
        from kcodec.user import use
        pytestmark = [pytest.mark.twins]
    """})
    assert unreached(tmp_path, ("codec",)) == []
    assert [p.name for p in selected(tmp_path, ("codec",))] == ["test_alpha.py", "test_user.py"]


def test_the_marker_follows_the_folders(request: pytest.FixtureRequest) -> None:
    assert in_twin_dirs("tests/client/consumer/test_fetcher_positions.py")
    assert in_twin_dirs("tests/broker/log/test_segment.py")
    assert not in_twin_dirs("tests/broker/coordinator/test_txn.py")
    assert not in_twin_dirs("tests/clientx/test_a.py")
    assert not in_twin_dirs("tests/spark/test_spark.py")
    # this module marks itself, and conftest marked nothing else of it
    assert request.node.get_closest_marker("twins") is not None
