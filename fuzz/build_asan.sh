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
py="${PYTHON:-$here/.venv/bin/python}"
mkdir -p "$dest"
# Copy the tracked sources (and uncommitted edits) of kcodec, src_c and the build script.
(cd "$here" && git ls-files -co --exclude-standard kcodec src_c setup.py pyproject.toml |
    tar -cf - -T -) | tar -xf - -C "$dest"
# UBSan reports are logged and fuzzing goes on (fuzz/burst.sh lists them): one benign report
# must not stop the search. ASan errors always abort.
san="-fsanitize=address,undefined,fuzzer-no-link -fsanitize-recover=undefined"
san="$san -fno-sanitize=function,vptr -fno-omit-frame-pointer"
# Column buffers from malloc with exact sizes (src_c/kcbuf.h), so ASan checks their bounds.
san="$san -DKCODEC_KCBUF_MALLOC=1"
cd "$dest"
CC="${CC:-clang}" LDSHARED="${CC:-clang} -shared" \
CFLAGS="$san -O1 -g" LDFLAGS="$san -shared-libasan" KCODEC_BUILD_JOBS="${JOBS:-2}" \
    "$py" setup.py -q build_ext --inplace >"$dest/build.log" 2>&1 || {
        tail -30 "$dest/build.log"; exit 1; }
# One preloadable runtime with ASan (+UBSan) AND libFuzzer, so that atheris uses this
# libFuzzer (it looks for LLVMFuzzerRunDriver) and the extensions' coverage counters and
# the Python coverage land in the same fuzzer (as atheris's merge script does).
rtdir="$(dirname "$(clang -print-file-name=libclang_rt.asan-x86_64.a)")"
tmp="$(mktemp -d)"
mkdir "$tmp/a" "$tmp/f"
(cd "$tmp/a" && ar x "$rtdir/libclang_rt.asan-x86_64.a" && rm -f asan_preinit*.o)
(cd "$tmp/f" && ar x "$rtdir/libclang_rt.fuzzer_no_main-x86_64.a")
"${CXX:-clang++}" -shared -Wl,-soname,libclang_rt.asan-x86_64.so -o "$dest/asan_with_fuzzer.so" "$tmp"/a/*.o "$tmp"/f/*.o \
    -lpthread -ldl -lrt -lm
rm -rf "$tmp"
echo "built into $dest; run a harness with fuzz/asan.sh TARGET [libFuzzer options] [CORPUS]"
