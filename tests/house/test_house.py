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


# Loggers a module names itself because operators know them by that name (the guides'
# logger table): the broker's failed-login line, the Spark source task's line.
TOPIC_LOGGERS = {
    "kcodec/broker/network/processor.py": "kcodec.broker.security",
    "kcodec/spark/_kafka.py": "kcodec.spark.source",
}


def _fixed_loggers(root) -> list[str]:
    """Every ``logging.getLogger("...")`` of a kcodec module outside kcodec.observe (which
    sets up the ``kcodec`` root) and outside TOPIC_LOGGERS: a module logs on its own logger,
    ``logging.getLogger(__name__)``."""
    import ast

    found = []
    for p in sorted((root / "kcodec").rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        if rel.startswith("kcodec/observe/"):
            continue
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "getLogger" and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and TOPIC_LOGGERS.get(rel) != node.args[0].value):
                found.append(f"{rel}:{node.lineno}: getLogger({node.args[0].value!r})")
    return found


def test_each_module_logs_on_its_own_logger(tmp_path) -> None:
    if not (REPO / "kcodec" / "observe").is_dir():
        pytest.skip("runs from a checkout (the sources are not beside the tests here)")
    assert _fixed_loggers(REPO) == [], "use logging.getLogger(__name__)"
    (tmp_path / "kcodec" / "client").mkdir(parents=True)
    (tmp_path / "kcodec" / "client" / "x.py").write_text(
        'import logging\nlog = logging.getLogger(__name__)\nold = logging.getLogger("kcodec.client")\n')
    assert _fixed_loggers(tmp_path) == ["kcodec/client/x.py:3: getLogger('kcodec.client')"]
