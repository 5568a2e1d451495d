"""The compiled extension builds without a single compiler warning (CI builds it with
KCODEC_WERROR=1, which makes them errors; users' builds do not)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.support import REPO

ROOT = str(REPO)


@pytest.mark.slow   # a full build: about a minute
@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                    reason="no C compiler on this machine")
def test_extension_builds_with_warnings_as_errors(tmp_path) -> None:
    if not os.path.exists(os.path.join(ROOT, "setup.py")):
        pytest.skip("not a source checkout")
    if os.environ.get("KCODEC_BUILT_WITH_WERROR") == "1" and os.environ.get("KCODEC_WERROR") == "1":
        # .ci/run sets it when its setup step built every module from nothing with
        # KCODEC_WERROR=1: a warning would have failed that step already
        pytest.skip("this run's setup built the extension with warnings as errors")
    env = {**os.environ, "KCODEC_WERROR": "1", "KCODEC_BUILD_JOBS": "2"}
    env.pop("KCODEC_NO_EXTENSIONS", None)
    r = subprocess.run([sys.executable, "setup.py", "build_ext", "--force",
                        "--build-temp", str(tmp_path / "t"), "--build-lib", str(tmp_path / "l")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "warning:" not in r.stderr, [x for x in r.stderr.splitlines() if "warning:" in x]
