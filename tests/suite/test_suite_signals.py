"""The suite does not depend on the signal disposition it inherits: started with SIGINT
ignored (what a script's ``&`` gives a background job), the tests of Ctrl-C behaviour still
send a real SIGINT to the processes they start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.support import REPO

CTRL_C_TEST = "tests/cli/test_cli_edges.py::test_interrupt_while_starting_exits_130_without_a_traceback"


@pytest.mark.skipif(os.name != "posix", reason="signal dispositions are inherited on POSIX")
def test_ctrl_c_tests_pass_when_the_run_inherits_sigint_ignored() -> None:
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                        CTRL_C_TEST], cwd=REPO, capture_output=True, text=True, timeout=120,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr
