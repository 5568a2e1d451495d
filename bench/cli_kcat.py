"""The ``kcodec`` command line beside kcat, end to end, as a user runs them.

Workload: N lines (default 1,000,000) of 58 bytes in a file; for each round, interleaved:
``kcat -P`` and ``kcodec produce -q`` of the file into a topic of one partition each, then
``kcat -C -e -q -o beginning`` and ``kcodec consume -e -q -o beginning`` of those topics to a
file; also ``kcodec --version`` and ``kcodec --help`` (kcat's ``-V``). Each run is a fresh
process (start-up, imports, connecting included), timed by wall clock; the medians and the
ratio kcodec/kcat are printed (below 1: kcodec is faster). On a shared machine the absolute
times are noise; the ratios, from runs side by side, are what to read.

    python -m bench.cli_kcat                     # starts `kcodec broker` on a free port
    python -m bench.cli_kcat -n 200000 -r 5 -b 127.0.0.1:9092   # a broker of your own

Needs kcat on PATH (or --kcat PATH).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _kcodec(*argv: str) -> list[str]:
    return [sys.executable, "-m", "kcodec", *argv]


def _env() -> dict[str, str]:
    """The children's environment: this checkout first on the path, and its byte code kept
    (as a pip install has it: PYTHONDONTWRITEBYTECODE would compile every module at every
    start, a third of a second of ``--help``)."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


LAST_CPU = [0.0]   # the CPU seconds (user + system) of the last command timed


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _timed(cmd: list[str], stdin: str | None = None, stdout: str | None = None) -> float:
    """Wall seconds of the command (its CPU seconds: ``LAST_CPU[0]``)."""
    env = _env()
    fin = open(stdin, "rb") if stdin else subprocess.DEVNULL
    fout = open(stdout, "wb") if stdout else subprocess.DEVNULL
    try:
        c0 = _cpu()
        t0 = time.perf_counter()
        p = subprocess.run(cmd, stdin=fin, stdout=fout, stderr=subprocess.PIPE, env=env)
        took = time.perf_counter() - t0
        LAST_CPU[0] = _cpu() - c0
    finally:
        for f in (fin, fout):
            if f is not subprocess.DEVNULL:
                f.close()
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.decode()[-2000:]}")
    return took


def _broker() -> tuple[subprocess.Popen, str]:
    from kcodec.testing.net import free_port

    port = free_port()
    env = _env()
    child = subprocess.Popen(_kcodec("broker", "--port", str(port)), env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    bootstrap = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if subprocess.run(_kcodec("topics", "list", "-b", bootstrap, "--timeout", "2"),
                          capture_output=True, env=env).returncode == 0:
            return child, bootstrap
        time.sleep(0.3)
    child.kill()
    raise SystemExit("kcodec broker did not start")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--lines", type=int, default=1_000_000)
    ap.add_argument("-r", "--rounds", type=int, default=3)
    ap.add_argument("-b", "--bootstrap", help="a running broker (default: start kcodec broker)")
    ap.add_argument("--kcat", default=shutil.which("kcat") or "kcat")
    args = ap.parse_args(argv)
    if not shutil.which(args.kcat):
        raise SystemExit(f"kcat not found ({args.kcat}): install it (apt-get install kcat)")
    # byte code for every module first, as an installed kcodec has it
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(ROOT, "kcodec")],
                   env=_env(), check=True, stdout=subprocess.DEVNULL)
    child = None
    if args.bootstrap is None:
        child, args.bootstrap = _broker()
    b = args.bootstrap
    work = tempfile.mkdtemp(prefix="kcodec-bench-cli-")
    try:
        src = os.path.join(work, "lines.txt")
        with open(src, "wb") as f:
            for i in range(args.lines):
                f.write(b"line %07d some payload of moderate size here abcdefghij\n" % i)
        times: dict[str, list[float]] = {}

        cpu: dict[str, list[float]] = {}

        def add(name: str, took: float) -> None:
            times.setdefault(name, []).append(took)
            cpu.setdefault(name, []).append(LAST_CPU[0])

        for _ in range(args.rounds):
            run = uuid.uuid4().hex[:8]
            kt, ct = f"bench-kcat-{run}", f"bench-kcodec-{run}"
            _timed(_kcodec("topics", "create", "-b", b, "-p", "1", kt, ct))
            add("start kcat -V", _timed([args.kcat, "-V"]))
            add("start kcodec --version", _timed(_kcodec("--version")))
            add("start kcodec --help", _timed(_kcodec("--help")))
            add("produce kcat", _timed([args.kcat, "-P", "-b", b, "-t", kt], stdin=src))
            add("produce kcodec", _timed(_kcodec("produce", "-q", "-b", b, "-t", ct), stdin=src))
            out_k, out_c = os.path.join(work, "k.out"), os.path.join(work, "c.out")
            add("consume kcat", _timed([args.kcat, "-C", "-b", b, "-t", kt, "-e", "-q",
                                        "-o", "beginning"], stdout=out_k))
            add("consume kcodec", _timed(_kcodec("consume", "-q", "-b", b, "-t", ct, "-e",
                                                 "-o", "beginning"), stdout=out_c))
            for out in (out_k, out_c):
                if os.path.getsize(out) != os.path.getsize(src):
                    raise SystemExit(f"{out}: {os.path.getsize(out)} bytes consumed, "
                                     f"{os.path.getsize(src)} produced")
        med = {k: statistics.median(v) for k, v in times.items()}
        mcpu = {k: statistics.median(v) for k, v in cpu.items()}
        ratios = {k: [times[f"{k} kcodec"][i] / times[f"{k} kcat"][i]
                      for i in range(args.rounds)] for k in ("produce", "consume")}
        print(f"{args.lines:,} lines, {args.rounds} rounds, broker {b}, load average "
              f"{os.getloadavg()[0]:.1f}; medians (s) and ratios (wall; the command's own CPU, "
              "user + system, beside it; the broker's is in neither)")
        for what in ("produce", "consume"):
            k, c = med[f"{what} kcat"], med[f"{what} kcodec"]
            kc, cc = mcpu[f"{what} kcat"], mcpu[f"{what} kcodec"]
            each = ", ".join(f"{r:.2f}" for r in ratios[what])
            print(f"  {what:8} kcat {k:6.2f}  kcodec {c:6.2f}  kcodec/kcat {c / k:5.2f} "
                  f"(each round {each}; their median {statistics.median(ratios[what]):.2f}); "
                  f"CPU kcat {kc:5.2f}  kcodec {cc:5.2f}  kcodec/kcat {cc / kc:5.2f}")
        v = med["start kcat -V"]
        for what in ("--version", "--help"):
            c = med[f"start kcodec {what}"]
            print(f"  kcodec {what:9} {c:6.3f} s, CPU {mcpu[f'start kcodec {what}']:.3f} s "
                  f"(kcat -V {v:.3f} s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if child is not None:
            child.terminate()
            child.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
