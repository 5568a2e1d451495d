#!/usr/bin/env bash
# Run a fuzz harness against the ASan/UBSan build made by fuzz/build_asan.sh:
#   fuzz/asan.sh TARGET [libFuzzer options] [CORPUS_DIR ...]
here="$(cd "$(dirname "$0")/.." && pwd)"
tree="${ASAN_TREE:-$here/fuzz/.asan}"
# The Python sources follow the work tree (only .pyx/.pxd/.c changes need a rebuild).
(cd "$here" && git ls-files -co --exclude-standard 'kcodec/*.py' | tar -cf - -T -) | tar -xf - -C "$tree"
PYTHONPATH="$tree" LD_PRELOAD="$tree/asan_with_fuzzer.so" \
ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1:handle_segv=1}" \
UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=0:report_error_type=1}" \
    exec "${PYTHON:-$here/.venv/bin/python}" "$here/fuzz/run.py" "$@"
