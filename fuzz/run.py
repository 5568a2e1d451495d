"""Coverage-guided fuzzing of one kcodec target with atheris (libFuzzer).

    python fuzz/run.py TARGET [libFuzzer options] [CORPUS_DIR ...]
    python fuzz/run.py records -max_total_time=120 -timeout=10 fuzz/corpus/records
    python fuzz/run.py --list

Targets are in ``fuzz/targets.py`` (each runs the compiled and the pure twin on the same
input and compares). A Finding (leaked exception, twin disagreement, broken bound) is an
uncaught exception, which libFuzzer reports as a crash and saves as ``crash-<sha1>``;
ASan/UBSan reports from the compiled twins abort the process the same way (build them with
``fuzz/build_asan.sh``; see fuzz/README.md). ``-timeout=N`` catches hangs. Without ASan the
process runs under RLIMIT_AS (``KCODEC_FUZZ_MEM_MB``, default 2048) so an allocation the
input does not justify fails as MemoryError, which the targets report; under ASan use
libFuzzer's ``-rss_limit_mb``/``-malloc_limit_mb`` instead (address space limits and ASan's
shadow memory do not mix).
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _limit_memory() -> None:
    if "asan" in os.environ.get("LD_PRELOAD", ""):
        return
    mb = int(os.environ.get("KCODEC_FUZZ_MEM_MB", "2048"))
    resource.setrlimit(resource.RLIMIT_AS, (mb << 20, mb << 20))


def main() -> None:
    import atheris

    # After PYTHONPATH, so an ASan build given there (fuzz/build_asan.sh) is the kcodec used.
    if ROOT not in sys.path:
        sys.path.append(ROOT)
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        print(__doc__)
        sys.exit(2)
    name = sys.argv.pop(1)
    # Python coverage: "all" (the kcodec package and the harness), "harness" (the same but
    # not the pure twins kcodec._py: they run on every input, uninstrumented they cost half
    # as much, and the compiled twins they mirror give C coverage in the ASan build) or
    # "none" (C coverage only).
    mode = os.environ.get("KCODEC_FUZZ_INSTRUMENT", "all")
    if mode not in ("all", "harness", "none"):
        sys.exit(f"kcodec fuzz: KCODEC_FUZZ_INSTRUMENT={mode!r}: all, harness or none")
    hook = (contextlib.nullcontext() if mode == "none" else
            atheris.instrument_imports(include=["kcodec", "fuzz"],
                                       exclude=["kcodec._py"] if mode == "harness" else None))
    with hook:
        import kcodec
        import kcodec.compression  # noqa: F401
        import kcodec.protocol  # noqa: F401
        import kcodec.records  # noqa: F401
        from fuzz.targets import TARGETS
        from kcodec import _impl

        for mod in _impl.module_names():   # the pure twins load lazily: instrument them now
            _impl.twin(mod, "python")

    if name == "--list":
        print("\n".join(sorted(TARGETS)))
        return
    target = TARGETS[name]
    if kcodec.IMPLEMENTATION != "cython" and not _impl._truthy("KCODEC_NO_EXTENSIONS"):
        sys.exit(f"kcodec fuzz: the compiled twins do not load ({_impl.EXTENSION_ERROR}); "
                 "build them, or set KCODEC_NO_EXTENSIONS=1 to fuzz the pure twin alone")
    print(f"kcodec fuzz: target {name}, implementation {kcodec.IMPLEMENTATION}, "
          f"from {os.path.dirname(kcodec.__file__)}", file=sys.stderr)
    _limit_memory()
    # libFuzzer's -merge=1 re-runs argv[0] (with its flags) through the shell: make that
    # this interpreter on this script and target.
    sys.argv[0] = f"{sys.executable} {os.path.abspath(__file__)} {name}"
    atheris.Setup(sys.argv, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
