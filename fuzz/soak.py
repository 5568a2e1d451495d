"""In-process differential soak: a target on stacked mutants of its seeds and committed
corpus for a while, with the build in place (no ASan, no coverage feedback), counting runs.

    python -m fuzz.soak TARGET SECONDS [RANDOM_SEED]

Every input goes through the target, which runs the compiled and the pure twin and raises
Finding on a leak, a disagreement or a broken bound; the first Finding stops the soak and
its input is written to fuzz/artifacts/soak-<target>-<n>. Prints the number of inputs run.
"""

from __future__ import annotations

import os
import random
import sys
import time

from fuzz.mutate import mutate
from fuzz.seeds import SEEDS
from fuzz.targets import TARGETS, Finding, memory_cap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv: list[str]) -> int:
    name, seconds = argv[0], float(argv[1])
    rng = random.Random(int(argv[2]) if len(argv) > 2 else 1)
    pool = list(SEEDS[name]())
    cdir = os.path.join(ROOT, "fuzz", "corpus", name)
    if os.path.isdir(cdir):
        for f in sorted(os.listdir(cdir)):
            with open(os.path.join(cdir, f), "rb") as fh:
                pool.append(fh.read())
    target = TARGETS[name]
    end = time.monotonic() + seconds
    runs = 0
    with memory_cap(2 << 30):
        while time.monotonic() < end:
            data = rng.choice(pool)
            for _ in range(rng.randint(1, 4)):
                data = mutate(data, rng)
            try:
                target(data)
            except Finding:
                os.makedirs(os.path.join(ROOT, "fuzz", "artifacts"), exist_ok=True)
                path = os.path.join(ROOT, "fuzz", "artifacts", f"soak-{name}-{runs}")
                with open(path, "wb") as fh:
                    fh.write(data)
                print(f"{name}: Finding after {runs} runs, input in {path}", flush=True)
                raise
            runs += 1
    print(f"{name}: {runs} runs in {seconds:.0f} s, no finding", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
