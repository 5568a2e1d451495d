#!/usr/bin/env bash
# Build the compiled twins with AddressSanitizer + UBSan + libFuzzer coverage counters into a
# separate tree (default fuzz/.asan, git-ignored), leaving the in-place build untouched.
#
#   fuzz/build_asan.sh [DEST]
#
# Needs clang and its compiler-rt (Debian: apt-get install clang libclang-rt-14-dev).
# Prints the environment to run a harness under ASan (see fuzz/README.md).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-$here/fuzz/.asan}"
py="${PYTHON:-/work/venv/bin/python}"
mkdir -p "$dest"
# Copy the tracked sources (and uncommitted edits) of kcodec, src_c and the build script.
(cd "$here" && git ls-files -co --exclude-standard kcodec src_c setup.py pyproject.toml |
    tar -cf - -T -) | tar -xf - -C "$dest"
san="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined"
san="$san -fno-sanitize=function,vptr -fno-omit-frame-pointer"
cd "$dest"
CC="${CC:-clang}" LDSHARED="${CC:-clang} -shared" \
CFLAGS="$san -O1 -g" LDFLAGS="$san -shared-libasan" KCODEC_BUILD_JOBS="${JOBS:-2}" \
    "$py" setup.py -q build_ext --inplace >"$dest/build.log" 2>&1 || {
        tail -30 "$dest/build.log"; exit 1; }
rt="$(clang -print-file-name=libclang_rt.asan-x86_64.so)"
echo "built into $dest"
echo "run with:"
echo "  PYTHONPATH=$dest LD_PRELOAD=$rt ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \\"
echo "  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 $py fuzz/<harness>.py ..."
