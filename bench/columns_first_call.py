"""Where the first ``decode_columns`` call in a process spends its time, against a warm call:
user and system CPU time and minor page faults (getrusage), one fresh process per size.

    python -m bench.columns_first_call [--sizes 10,50,200]

Same blobs as bench.columns_scaling (workload-R batches, CRC checked). The system time and
the faults of the first call are the kernel giving the columns fresh zeroed pages: a warm
call takes its blocks back from kcbuf's cache with their pages.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys


def _usage() -> tuple[float, float, int]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime, r.ru_minflt


def _child(k: int) -> dict[str, float]:
    from bench.columns_scaling import _blob
    from kcodec.records import decode_columns

    decode_columns(_blob(1))          # numpy, the module and a small allocation set up
    blob = _blob(k)
    out: dict[str, float] = {"bytes": len(blob)}
    for name in ("first", "warm1", "warm2", "warm3"):
        u0, s0, f0 = _usage()
        cols = decode_columns(blob)
        u1, s1, f1 = _usage()
        del cols
        out[name + "_user"] = u1 - u0
        out[name + "_sys"] = s1 - s0
        out[name + "_faults"] = f1 - f0
    return out


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(_child(int(sys.argv[2]))))
        return
    sizes = [10, 50, 200]
    if "--sizes" in sys.argv:
        sizes = [int(x) for x in sys.argv[sys.argv.index("--sizes") + 1].split(",")]
    print(f"{'batches':>7} {'MB':>6} | {'first user':>10} {'sys':>6} {'faults':>7} |"
          f" {'warm user':>9} {'sys':>6} {'faults':>7}   (ms, ms, count; warm: median of 3)")
    for k in sizes:
        got = subprocess.run([sys.executable, "-m", "bench.columns_first_call", "--child", str(k)],
                             capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": "0"})
        r = json.loads(got.stdout)

        def warm(what: str, r: dict = r) -> float:
            return sorted(r[f"warm{i}_{what}"] for i in (1, 2, 3))[1]

        print(f"{k:>7} {r['bytes'] / 1e6:6.1f} | {r['first_user'] * 1e3:10.1f}"
              f" {r['first_sys'] * 1e3:6.1f} {r['first_faults']:7.0f} |"
              f" {warm('user') * 1e3:9.1f} {warm('sys') * 1e3:6.1f} {warm('faults'):7.0f}",
              flush=True)


if __name__ == "__main__":
    main()
