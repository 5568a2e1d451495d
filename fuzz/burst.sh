#!/usr/bin/env bash
# A bounded burst over every target (or the ones named), one at a time (CPU-friendly):
#   fuzz/burst.sh [SECONDS_PER_TARGET] [TARGET ...]
# Uses the ASan build when fuzz/.asan exists (fuzz/build_asan.sh), else the in-place one.
# Corpora grow in fuzz/corpus/<target> (seeded by `python -m fuzz.seeds`); crashes are saved
# in fuzz/artifacts/ and listed at the end.
set -u
here="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-120}"; shift || true
targets="${*:-varint xerial compression records columns segscan segment protocol framing}"
py="${PYTHON:-$here/.venv/bin/python}"
cd "$here"
[ -d fuzz/corpus ] || "$py" -m fuzz.seeds fuzz/corpus
mkdir -p fuzz/artifacts fuzz/logs
if [ -f fuzz/.asan/asan_with_fuzzer.so ]; then run="$here/fuzz/asan.sh"; else run="$py $here/fuzz/run.py"; fi
for t in $targets; do
    [ -d "fuzz/corpus/$t" ] || "$py" -m fuzz.seeds fuzz/corpus "$t"
    (cd fuzz/artifacts && $run "$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=3000 \
        -malloc_limit_mb=1024 -print_final_stats=1 "../corpus/$t" >"../logs/$t.log" 2>&1)
    echo "$t: exit $? $(grep -E 'DONE' "fuzz/logs/$t.log" | tail -1)"
done
ls -la fuzz/artifacts | grep -E 'crash|timeout|oom|leak' || echo "no crash artifacts"
grep -h "runtime error" fuzz/logs/*.log | sort | uniq -c || echo "no UBSan reports"
