"""Draw the benchmarks' side-by-side ratios as pictures for the docs.

    python -m bench.plots                    # redraw from docs/_static/bench/results.jsonl
    python -m bench.plots --run              # run the benchmarks first, then redraw
    python -m bench.plots --run bench/test_bench_records.py -k decode   # a subset

The benchmarks' ``ratios`` fixture appends one JSON line per measured entry to
``KCODEC_BENCH_JSON`` (workload, entry name, median and minimum seconds, amount, unit);
``--run`` runs pytest on bench/ with it pointed at a scratch file and replaces the
workloads it measured in the results file, which is committed beside the pictures. For
each workload the newest run counts. Pictures (SVG, matplotlib's Agg backend, no display
needed) go to docs/_static/bench/: one per workload (every entry's time as a multiple of
kcodec's, by medians) and overview.svg (kcodec against the fastest other entry of each
workload); figures.md lists them for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "_static" / "bench"
RESULTS = OUT / "results.jsonl"
DEFAULT_BENCHES = ["bench/test_bench_primitives.py", "bench/test_bench_records.py",
                   "bench/test_bench_protocol.py"]
SUBJECTS = ("kcodec cython", "kcodec python")


def load(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Workload -> the rows of its newest run."""
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            runs.setdefault(row["workload"], {}).setdefault(row["time"], []).append(row)
    return {w: by_time[max(by_time)] for w, by_time in runs.items()}


def ratios(rows: list[dict[str, Any]]) -> list[tuple[str, float]]:
    """(entry, its median time / kcodec's) for each entry; above 1: kcodec is faster."""
    subject = next((r for name in SUBJECTS for r in rows if r["name"] == name), None)
    if subject is None or subject["median"] <= 0:
        return []
    return [(r["name"], r["median"] / subject["median"]) for r in rows]


def slug(workload: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", workload.lower()).strip("-")


def draw(results: dict[str, list[dict[str, Any]]], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.hashsalt"] = "kcodec"      # the same SVG for the same numbers
    matplotlib.rcParams["svg.fonttype"] = "none"
    out.mkdir(parents=True, exist_ok=True)
    written = []
    overview: list[tuple[str, float, str]] = []
    for workload in sorted(results):
        pairs = ratios(results[workload])
        if not pairs:
            continue
        peers = [(n, r) for n, r in pairs if not n.startswith("kcodec")]   # other libraries
        if peers:
            best = min(peers, key=lambda p: p[1])
            overview.append((workload, best[1], best[0]))
        fig, ax = plt.subplots(figsize=(7, 0.45 * len(pairs) + 1.0))
        names = [n for n, _ in pairs][::-1]
        values = [r for _, r in pairs][::-1]
        colours = ["#2b6cb0" if n in SUBJECTS else "#a0aec0" for n in names]
        ax.barh(names, values, color=colours)
        ax.axvline(1.0, color="#333333", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("time relative to kcodec (median; above 1: kcodec is faster)")
        ax.set_title(workload, fontsize=10)
        for y, v in enumerate(values):
            ax.text(v, y, f" {v:.2f}x", va="center", fontsize=8)
        fig.tight_layout()
        path = out / f"{slug(workload)}.svg"
        fig.savefig(path, format="svg", metadata={"Date": None})
        plt.close(fig)
        written.append(path)
    if overview:
        fig, ax = plt.subplots(figsize=(7, 0.4 * len(overview) + 1.2))
        labels = [f"{w}  (vs {peer})" for w, _, peer in overview][::-1]
        values = [r for _, r, _ in overview][::-1]
        ax.barh(labels, values, color=["#2b6cb0" if v >= 1 else "#c05621" for v in values])
        ax.axvline(1.0, color="#333333", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("kcodec's speed / the fastest other entry's (median)")
        ax.set_title("kcodec against the fastest peer, per workload", fontsize=10)
        for y, v in enumerate(values):
            ax.text(v, y, f" {v:.2f}x", va="center", fontsize=8)
        fig.tight_layout()
        path = out / "overview.svg"
        fig.savefig(path, format="svg", metadata={"Date": None})
        plt.close(fig)
        written.insert(0, path)
    lines = ["<!-- written by python -m bench.plots: do not edit -->", ""]
    for path in written:
        lines += [f"![{path.stem}](./{path.name})", ""]
    (out / "figures.md").write_text("\n".join(lines), encoding="utf-8")
    return written


def run_benchmarks(args: list[str]) -> None:
    """Run the benchmarks and replace the workloads they measured in RESULTS."""
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp) / "rows.jsonl"
        env = {**os.environ, "KCODEC_BENCH_JSON": str(scratch)}
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               *(args or DEFAULT_BENCHES), "--benchmark-only"]
        print("running:", " ".join(cmd), flush=True)
        rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
        if rc != 0:
            raise SystemExit(f"the benchmarks failed (exit {rc}); the results are unchanged")
        if not scratch.exists():
            raise SystemExit("the benchmarks measured nothing (was pytest-benchmark "
                             "installed? pip install -e '.[bench]')")
        fresh = [json.loads(x) for x in scratch.read_text().splitlines() if x.strip()]
    measured = {r["workload"] for r in fresh}
    kept = []
    if RESULTS.exists():
        kept = [x for x in RESULTS.read_text().splitlines()
                if x.strip() and json.loads(x)["workload"] not in measured]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(kept + [json.dumps(r) for r in fresh]) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.plots", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", action="store_true",
                        help="run the benchmarks first (arguments after it go to pytest)")
    parser.add_argument("--results", type=Path, default=RESULTS,
                        help="the results file (JSON lines of the ratios fixture)")
    parser.add_argument("pytest_args", nargs="*", help="with --run: what pytest runs")
    args = parser.parse_args(argv)
    if args.run:
        run_benchmarks(args.pytest_args)
    if not args.results.exists():
        print(f"no results at {args.results}: run python -m bench.plots --run",
              file=sys.stderr)
        return 1
    for path in draw(load(args.results), OUT):
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
