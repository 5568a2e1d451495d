#!/usr/bin/env bash
# A long fuzzing campaign, then a minimized corpus per target:
#   fuzz/campaign.sh SECONDS_PER_TARGET [TARGET ...]        (LANES=2 targets at a time)
# Runs each target (all by default) under the ASan + UBSan build when fuzz/.asan exists
# (fuzz/build_asan.sh), else the in-place build, at nice 19. The working corpus
# fuzz/work/<target> (git-ignored) starts from the committed corpus fuzz/corpus/<target> and
# the code-made seeds; afterwards libFuzzer's -merge=1 keeps only the inputs that add
# coverage and they replace fuzz/corpus/<target>. Logs in fuzz/logs/<target>.log, crashes in
# fuzz/artifacts/; the table at the end gives each target's executions.
set -u
here="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:?seconds per target}"; shift
py="${PYTHON:-/work/venv/bin/python}"
cd "$here"
targets="${*:-$(PYTHONPATH=. "$py" -c 'from fuzz.targets import TARGETS; print(" ".join(sorted(TARGETS)))')}"
lanes="${LANES:-2}"
mkdir -p fuzz/artifacts fuzz/logs fuzz/work fuzz/corpus
if [ -f fuzz/.asan/asan_with_fuzzer.so ]; then run="$here/fuzz/asan.sh"; else run="$py $here/fuzz/run.py"; fi
opts=(-timeout=10 -rss_limit_mb=3000 -malloc_limit_mb=1024 -print_final_stats=1)

one() {
    local t="$1"
    mkdir -p "fuzz/work/$t" "fuzz/corpus/$t"
    PYTHONPATH=. "$py" -m fuzz.seeds fuzz/work "$t"
    cp -n fuzz/corpus/"$t"/* "fuzz/work/$t/" 2>/dev/null
    (cd fuzz/artifacts && PYTHON="$py" nice -n 19 $run "$t" -max_total_time="$secs" "${opts[@]}" \
        "../work/$t" >"../logs/$t.log" 2>&1)
    local rc=$?
    local fresh="fuzz/work/.min-$t"
    rm -rf "$fresh" && mkdir -p "$fresh"
    (cd fuzz/artifacts && PYTHON="$py" nice -n 19 $run "$t" -merge=1 "${opts[@]}" "../../$fresh" \
        "../work/$t" >"../logs/$t.merge.log" 2>&1)
    if [ -n "$(ls -A "$fresh")" ]; then
        rm -rf "fuzz/corpus/$t" && mv "$fresh" "fuzz/corpus/$t"
    fi
    echo "$t: exit $rc, $(grep -h 'stat::number_of_executed_units' "fuzz/logs/$t.log" | awk '{print $2}') executions, corpus $(ls "fuzz/corpus/$t" | wc -l) files"
}

running=0
for t in $targets; do
    one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$lanes" ]; then wait -n; running=$((running - 1)); fi
done
wait
ls -la fuzz/artifacts | grep -E 'crash|timeout|oom|leak' || echo "no crash artifacts"
grep -h "runtime error" fuzz/logs/*.log | sort | uniq -c || echo "no UBSan reports"
