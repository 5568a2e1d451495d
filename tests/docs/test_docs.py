"""The docs build clean, and the README stays short and its links resolve.

The build is the one scripts/docs runs (Sphinx, warnings as errors, from scratch): a broken
internal link, a missing page in a toctree, a bad docstring or a setting without a
description in a generated configuration table fails it. It needs the docs extra
(``pip install -e '.[docs]'``; the test extra includes it). External links are not checked
here (no network in CI): ``scripts/docs -b linkcheck`` does that by hand.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO

ROOT = Path(REPO)
DOCS = ROOT / "docs"

pytestmark = pytest.mark.skipif(not (DOCS / "conf.py").exists(),
                                reason="docs/ is not beside the tests (an installed wheel)")


def test_docs_build_with_warnings_as_errors(tmp_path: Path) -> None:
    try:
        import myst_parser  # noqa: F401
        import sphinx  # noqa: F401
    except ImportError as exc:
        pytest.fail(f"building the docs needs the docs extra ({exc.name} is missing): "
                    "pip install -e '.[docs]' (scripts/test installs it)")
    p = subprocess.run([sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-q",
                        "-b", "html", "-d", str(tmp_path / "doctrees"), str(DOCS),
                        str(tmp_path / "html")], capture_output=True, text=True, timeout=600,
                       cwd=ROOT)
    assert p.returncode == 0, f"the docs do not build clean (scripts/docs):\n{p.stderr[-6000:]}"
    assert (tmp_path / "html" / "reference" / "config.html").exists()
    # the API reference: a page per package, not one page of everything
    pages = {f.stem: f.stat().st_size for f in (tmp_path / "html" / "reference" / "api").glob("*.html")}
    assert {"kcodec", "errors", "records", "protocol", "client", "broker", "runtime"} <= set(pages)
    assert (tmp_path / "html" / "reference" / "api.html").stat().st_size < 100_000
    # code blocks wide enough, long lines wrapped instead of scrolling sideways
    assert "kcodec.css" in (tmp_path / "html" / "index.html").read_text(encoding="utf-8")
    css = (tmp_path / "html" / "_static" / "kcodec.css").read_text(encoding="utf-8")
    assert "pre-wrap" in css


def test_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move reference text to docs/"


_LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def test_readme_links_resolve() -> None:
    """Every relative link and picture of the README names a file of the checkout (and a
    heading that exists, for links into Markdown pages)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    bad = []
    for target, anchor in _LINK.findall(text):
        if "://" in target:
            continue
        path = ROOT / target
        if not path.exists():
            bad.append(target)
        elif anchor and path.suffix == ".md":
            slugs = {_slug(h) for h in re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"),
                                                  re.M)}
            if anchor[1:] not in slugs:
                bad.append(target + anchor)
    assert not bad, f"README.md links to what does not exist: {bad}"


def _slug(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_layers_picture_is_current() -> None:
    """docs/_static/layers.svg (the README's picture) is drawn from tests/house/test_layers.py's
    floors; regenerate it with ``python docs/_ext/kcodec_docs.py`` when they change."""
    pytest.importorskip("sphinx")
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        from kcodec_docs import layers_svg
    finally:
        sys.path.remove(str(DOCS / "_ext"))
    assert (DOCS / "_static" / "layers.svg").read_text() == layers_svg(), \
        "docs/_static/layers.svg is stale: python docs/_ext/kcodec_docs.py"


# What the docs build may not import: the test extra's own packages, and the peers and
# Spark that scripts/docs does not install (the reference mocks them).
_NOT_IN_A_DOCS_VENV = ("pytest", "_pytest", "hypothesis", "confluent_kafka", "trustme", "scramp",
                       "kafka", "aiokafka", "redis", "pyspark", "pyarrow")
_BLOCKED_BUILD = """
import runpy, sys
BLOCK = set(sys.argv[1].split(","))
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCK:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
sys.argv = ["sphinx", *sys.argv[2:]]
runpy.run_module("sphinx", run_name="__main__")
"""


@pytest.mark.slow
def test_docs_build_with_only_the_docs_extra(tmp_path: Path) -> None:
    """scripts/docs installs the docs extra only: the build must not import pytest (the
    layers picture reads tests/house/test_layers.py's table from its source), the test
    peers, Spark or pyarrow."""
    pytest.importorskip("sphinx")
    p = subprocess.run([sys.executable, "-c", _BLOCKED_BUILD, ",".join(_NOT_IN_A_DOCS_VENV),
                        "-E", "-W", "--keep-going", "-q", "-b", "html", "-d",
                        str(tmp_path / "doctrees"), str(DOCS), str(tmp_path / "html")],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, f"the docs need more than the docs extra:\n{p.stderr[-6000:]}"
    assert (tmp_path / "html" / "reference" / "config.html").exists()
