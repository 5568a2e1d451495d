"""Sum up fuzz/logs/campaign.tsv (written by fuzz/campaign.sh) per target, as a Markdown table.

    python -m fuzz.report [fuzz/logs/campaign.tsv]

Executions are added up over a target's runs (each run starts from the corpus the previous
one left); exec/s is executions over the seconds the runs took (wall clock, at nice 19);
cov/ft are libFuzzer's at the end of the target's last run; UBSan counts reports in the logs.
Every execution runs both twins, so under an ``asan+ubsan`` build the executions are ASan
and differential executions at once.
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict


def main(argv: list[str]) -> int:
    path = argv[0] if argv else "fuzz/logs/campaign.tsv"
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    by: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        by[r["target"]].append(r)
    print("| target | builds | runs | executions | seconds | exec/s | cov / ft (last) "
          "| UBSan | exits | commits |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | --- | --- |")
    for target, rs in sorted(by.items()):
        n = sum(int(r["executions"] or 0) for r in rs)
        s = sum(int(r["seconds"] or 0) for r in rs)
        last = rs[-1]
        builds = " ".join(sorted({r["build"] for r in rs}))
        print(f"| {target} | {builds} | {len(rs)} | {n:,} | {s:,} | {n / max(s, 1):,.0f} "
              f"| {last['cov'] or '-'} / {last['ft'] or '-'} "
              f"| {sum(int(r['ubsan'] or 0) for r in rs)} "
              f"| {' '.join(sorted({r['exit'] for r in rs}))} "
              f"| {' '.join(sorted({r['commit'] for r in rs}))} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
