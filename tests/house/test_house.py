"""House rules that no single module can check for itself."""

from __future__ import annotations

import re

import pytest

from tests.support import REPO

# The word "issue" followed by a number: a tracker number says nothing to a reader
# of the code and goes stale when the tracker moves; a comment says what and why instead.
_ISSUE_NUMBER = re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)
_CODE = ("*.py", "*.pyx", "*.pxd", "*.pyi", "*.c", "*.h", "*.sh")


def _code_files() -> list:
    roots = [REPO / d for d in ("kcodec", "tools", "bench", "fuzz", "tests", "src_c", "scripts")]
    files = []
    for root in roots:
        if root.is_dir():
            for pattern in _CODE:
                files += [p for p in root.rglob(pattern) if ".asan" not in p.parts]
    return files


def test_code_names_no_issue_numbers() -> None:
    files = _code_files()
    if not any(p.is_relative_to(REPO / "kcodec") for p in files):
        pytest.skip("runs from a checkout (the sources are not beside the tests here)")
    found = []
    for p in files:
        for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if _ISSUE_NUMBER.search(line):
                found.append(f"{p.relative_to(REPO)}:{n}: {line.strip()}")
    assert not found, "issue numbers in code (say what and why instead):\n" + "\n".join(found)
