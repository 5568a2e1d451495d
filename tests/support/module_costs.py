"""The order in which pytest-xdist hands out test modules: the costliest first.

``.ci/run`` runs each step on one worker per CPU with ``--dist loadfile`` (a module to a
worker), and its slow step with ``--no-loadscope-reorder`` (without it xdist sorts modules
by how many tests they hold, which puts a Spark cluster module of two five-minute tests
near the end, where it ran alone while the other worker idled; the compiled and pure steps
keep that order, see .ci/run). The workers sort the collected modules by
their measured cost, most expensive first, so the run ends on short modules and the
workers finish together (the longest-processing-time-first rule).

The costs are worker-seconds per module (setup, call and teardown of its tests, summed over
CI's steps) in ``module_costs.json`` beside this file, read off the ``--durations=0`` lines
of a whole ``.ci/run``::

    KCODEC_CI_DURATIONS=0 .ci/run > ci.log 2>&1
    python -m tests.support.module_costs ci.log      # rewrites module_costs.json

Modules that share a session-scoped fixture too costly to make twice go to one worker as one
unit (``SAME_WORKER``: the Spark standalone cluster of tests/spark/conftest.py, which two
workers would otherwise each start, two clusters on two cores at once).

A module not in the file is costed by its folder: ``HEAVY_FOLDER_S`` for the folders whose
modules start Spark, processes or builds, ``LIGHT_S`` elsewhere. Stale figures only make the
order less good, never a test wrong: the order of modules is the only thing they change.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

COSTS_FILE = Path(__file__).with_name("module_costs.json")
ROOT = Path(__file__).resolve().parents[2]     # the checkout: module paths start with tests/
#: folders whose modules take a minute or more (Spark sessions and clusters, kcodec run's
#: processes, the CLI's subprocesses, the docs build, the packaging builds)
HEAVY_FOLDERS = ("tests/spark/", "tests/runtime/", "tests/docs/", "tests/suite/", "tests/cli/",
                 "tests/packaging/", "tests/faults/")
#: module -> the module whose worker runs it too (they share a session fixture)
SAME_WORKER = {"tests/spark/test_spark_eos_cluster.py": "tests/spark/test_spark_cluster.py"}
HEAVY_FOLDER_S = 60.0
LIGHT_S = 1.0

# "12.34s call     tests/spark/test_x.py::test_y[a-b]" (pytest's --durations lines)
_LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(tests/[^:\s]+\.py)::")


def load(path: Path = COSTS_FILE) -> dict[str, float]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return {str(k): float(v) for k, v in data.get("modules", {}).items()}


def cost(module: str, costs: dict[str, float]) -> float:
    """The module's (path relative to the checkout) cost in worker-seconds."""
    if module in costs:
        return costs[module]
    return HEAVY_FOLDER_S if module.startswith(HEAVY_FOLDERS) else LIGHT_S


def unit(module: str) -> str:
    """The unit of work (a module, or the module it shares a worker with) xdist hands out."""
    return SAME_WORKER.get(module, module)


def order(modules: list[str], costs: dict[str, float]) -> list[str]:
    """``modules`` costliest first; equal costs keep their given order."""
    return sorted(modules, key=lambda m: -cost(m, costs))


def from_durations(lines: list[str]) -> dict[str, float]:
    """Worker-seconds per module from ``--durations=0`` lines (any number of runs)."""
    total: dict[str, float] = defaultdict(float)
    for line in lines:
        m = _LINE.match(line)
        if m:
            total[m.group(3)] += float(m.group(1))
    return dict(total)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m tests.support.module_costs CI_LOG [CI_LOG ...]", file=sys.stderr)
        return 2
    lines: list[str] = []
    for name in argv:
        lines += Path(name).read_text(encoding="utf-8", errors="replace").splitlines()
    modules = from_durations(lines)
    if not modules:
        print("no --durations lines in the logs: run .ci/run with KCODEC_CI_DURATIONS=0",
              file=sys.stderr)
        return 1
    data = {"source": "the --durations=0 lines of .ci/run (tests/support/module_costs.py)",
            "modules": {m: round(s, 1) for m, s in sorted(modules.items(), key=lambda kv: -kv[1])}}
    COSTS_FILE.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"{len(modules)} modules, {sum(modules.values()):.0f} worker-seconds -> {COSTS_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
