"""Every example in README.md and docs/ runs, so the docs cannot go stale.

* ```python blocks: each page's blocks run in order in one fresh Python process, sharing
  one namespace (a page reads as one session), against a kcodec broker this test starts
  on a free port: ``127.0.0.1:9092`` in a block is replaced by its address, and
  ``KCODEC_BOOTSTRAP`` points at it. The process runs in a scratch directory.
* ```console blocks: each ``$ kcodec ...`` line is run (against the same broker) and what
  it prints is compared with the lines below it (each block against a fresh broker); ``...`` in an expected line matches any
  text, and a line that is only ``...`` matches any number of lines. Other ``$`` lines
  (``pip install``) are shown, not run.
* A block right after ``<!-- no-run: why -->`` is not run (the test counts and prints
  them with their reasons); one after ``<!-- slow: why -->`` runs in the slow test
  (Spark). The README's ``kcodec run`` quickstart has its own test
  (tests/runtime/test_runtime_run.py) and the command list of the CLI guide its own
  (tests/cli/test_cli_edges.py).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import REPO

ROOT = Path(REPO)
# (none where only tests/ was copied beside an installed wheel: the skip below says so)
PAGES = [p for p in [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md")
                                                 if "_build" not in p.parts)] if p.exists()]

pytestmark = pytest.mark.skipif(not (ROOT / "docs" / "conf.py").exists(),
                                reason="docs/ is not beside the tests (an installed wheel)")

_FENCE = re.compile(r"^```(\w*)\s*$")
_MARK = re.compile(r"^<!--\s*(no-run|slow):\s*(.+?)\s*-->\s*$")


@dataclass
class Block:
    page: Path
    line: int            # of the opening fence, 1-based
    lang: str
    code: str
    mark: str | None     # "no-run", "slow" or None
    why: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    out: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m or not m.group(1):
            if m:            # a fence without a language: skip to its end
                i += 1
                while i < len(lines) and not lines[i].startswith("```"):
                    i += 1
            i += 1
            continue
        start = i
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        i += 1
        prev = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        mark = _MARK.match(prev)
        out.append(Block(page, start + 1, m.group(1), "\n".join(body) + "\n",
                         mark.group(1) if mark else None, mark.group(2) if mark else ""))
    return out


def all_blocks() -> list[Block]:
    return [b for page in PAGES for b in blocks(page)]


@pytest.fixture(scope="module")
def bootstrap() -> str:
    from kcodec.broker import Cluster

    with Cluster(num_partitions=1) as cluster:
        yield cluster.bootstrap


def _env(bootstrap: str) -> dict[str, str]:
    env = dict(os.environ)
    env["KCODEC_BOOTSTRAP"] = bootstrap
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


_RUNNER = r"""
import sys, traceback
blocks = __BLOCKS__
ns = {"__name__": "__example__"}
for where, code in blocks:
    print(f"--- {where}", flush=True)
    try:
        exec(compile(code, where, "exec"), ns)
    except BaseException:
        traceback.print_exc()
        print(f"FAILED {where}", file=sys.stderr)
        sys.exit(1)
"""


def run_python(page_blocks: list[Block], bootstrap: str, cwd: Path,
               timeout: float = 240) -> subprocess.CompletedProcess[str]:
    code = [(b.where, b.code.replace("127.0.0.1:9092", bootstrap)) for b in page_blocks]
    script = _RUNNER.replace("__BLOCKS__", repr(code))
    return subprocess.run([sys.executable, "-c", script], cwd=cwd, env=_env(bootstrap),
                          capture_output=True, text=True, timeout=timeout)


def _matches(expected: list[str], got: list[str]) -> bool:
    if not expected:
        return not got
    head = expected[0]
    if head.strip() == "...":
        return any(_matches(expected[1:], got[k:]) for k in range(len(got) + 1))
    if not got:
        return False
    pattern = ".*".join(re.escape(part) for part in head.rstrip().split("..."))
    return re.fullmatch(pattern, got[0].rstrip()) is not None and _matches(expected[1:], got[1:])


def console_steps(block: Block) -> list[tuple[str, list[str]]]:
    steps: list[tuple[str, list[str]]] = []
    for line in block.code.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:].split("  #")[0].strip(), []))
        elif steps:
            steps[-1][1].append(line)
    return steps


def _pages_with_python() -> list[Path]:
    return [p for p in PAGES if any(b.lang == "python" and b.mark is None for b in blocks(p))]


@pytest.mark.parametrize("page", _pages_with_python(), ids=lambda p: str(p.relative_to(ROOT)))
def test_python_examples_run(page: Path, bootstrap: str, tmp_path: Path) -> None:
    todo = [b for b in blocks(page) if b.lang == "python" and b.mark is None]
    p = run_python(todo, bootstrap, tmp_path)
    assert p.returncode == 0, (f"an example of {page.relative_to(ROOT)} failed:\n"
                               f"{p.stdout[-3000:]}\n{p.stderr[-5000:]}")


def _console_blocks() -> list[Block]:
    return [b for b in all_blocks() if b.lang == "console" and b.mark is None]


@pytest.mark.parametrize("block", _console_blocks(), ids=lambda b: b.where)
def test_console_examples_print_what_they_show(block: Block, tmp_path: Path) -> None:
    """Each block against a broker of its own: it shows what a fresh broker prints."""
    from kcodec.broker import Cluster

    with Cluster() as cluster:
        _run_console(block, cluster.bootstrap, tmp_path)


def _run_console(block: Block, bootstrap: str, tmp_path: Path) -> None:
    for command, expected in console_steps(block):
        if not command.startswith("kcodec "):
            continue                        # pip install ...: shown, not run
        argv = [sys.executable, "-m", "kcodec", *shlex.split(command)[1:]]
        p = subprocess.run(argv, cwd=tmp_path, env=_env(bootstrap), capture_output=True,
                           text=True, timeout=120)
        got = p.stdout.splitlines()
        assert p.returncode == 0, f"{block.where}: {command!r} failed:\n{p.stderr}"
        assert _matches(expected, got), (f"{block.where}: {command!r} printed\n"
                                         + "\n".join(got) + "\ninstead of\n"
                                         + "\n".join(expected))


def test_examples_not_run_are_marked_and_counted(capsys: pytest.CaptureFixture[str]) -> None:
    """Every block is a runnable language, marked, or a shell/text block shown as is; the
    ones not run are listed with their reasons."""
    skipped = [b for b in all_blocks() if b.mark == "no-run"]
    for b in skipped:
        assert b.why, f"{b.where}: no-run needs a reason"
    with capsys.disabled():
        print(f"\n{len(skipped)} examples marked no-run:")
        for b in skipped:
            print(f"  {b.where}: {b.why}")
    ran = [b for b in all_blocks() if b.lang in ("python", "console") and b.mark is None]
    assert len(ran) >= 20, "the docs lost their examples?"


def test_block_parser_and_output_matching() -> None:
    assert _matches(["a ... c"], ["a b c"]) and not _matches(["a ... c"], ["a b d"])
    assert _matches(["x", "...", "z"], ["x", "1", "2", "z"]) and _matches(["...", "z"], ["z"])
    assert not _matches(["x"], ["x", "y"])


@pytest.mark.slow
def test_spark_examples_run(tmp_path: Path) -> None:
    """The Spark examples, against a broker with a data directory (their /tmp/ paths are
    put under the test's own directory) holding a topic "events" with records."""
    pytest.importorskip("pyspark")
    from kcodec.broker import Cluster
    from kcodec.client import Producer

    todo = [b for b in all_blocks() if b.lang == "python" and b.mark == "slow"]
    assert todo, "no slow (Spark) examples found"
    data = tmp_path / "kdata"
    with Cluster(data_dir=data) as cluster:
        with Producer(bootstrap_servers=cluster.bootstrap) as producer:
            for i in range(10):
                producer.send("events", b"e%d" % i)
        for b in todo:
            b.code = b.code.replace("/tmp/", f"{tmp_path}/")
            proc = run_python([b], cluster.bootstrap, tmp_path, timeout=600)
            assert proc.returncode == 0, (f"{b.where} failed:\n{proc.stdout[-3000:]}\n"
                                          f"{proc.stderr[-5000:]}")
