#!/usr/bin/env bash
# A fuzzing campaign over every target (or the ones named), then a minimized corpus each:
#
#   fuzz/campaign.sh --runs N [TARGET ...]     N executions per target (libFuzzer -runs=N)
#   fuzz/campaign.sh SECONDS [TARGET ...]      SECONDS per target (-max_total_time)
#
# Each execution runs the compiled AND the pure twin on the input (fuzz/targets.py), so with
# the ASan + UBSan build (fuzz/build_asan.sh; used when fuzz/.asan exists) every execution
# counts both as an ASan execution and as a differential one. Without that build the in-place
# extension is used (differential only). Targets run one after the other at nice 19
# (LANES=2 runs two at a time). The working corpus fuzz/work/<target> (git-ignored) starts
# from the committed corpus fuzz/corpus/<target> and the code-made seeds; afterwards
# libFuzzer's -merge=1 keeps the inputs that add coverage and they replace fuzz/corpus/<target>
# (MERGE=0 skips that). Logs in fuzz/logs/, crashes in fuzz/artifacts/, and one line per
# target in fuzz/logs/campaign.tsv: what ran, on which commit and build, how fast.
#
# Knobs (environment): MAX_LEN (longest input, default 1024), MAX_SECS (a wall-clock cap
# for --runs, default none), KCODEC_FUZZ_INSTRUMENT (Python coverage: all, harness, none;
# default harness with the ASan build, all without), PYTHON (default .venv/bin/python),
# ASAN_OPTIONS (default: no allocation stacks, which makes ASan's malloc 3-4x cheaper; replay
# a crash with fuzz/asan.sh and the default options to get them).
set -u
here="$(cd "$(dirname "$0")/.." && pwd)"
runs=""
if [ "${1:-}" = "--runs" ]; then runs="${2:?--runs N}"; shift 2; else secs="${1:?--runs N or SECONDS}"; shift; fi
py="${PYTHON:-$here/.venv/bin/python}"
cd "$here"
targets="${*:-$(PYTHONPATH=. "$py" -c 'from fuzz.targets import TARGETS; print(" ".join(sorted(TARGETS)))')}"
lanes="${LANES:-1}"
mkdir -p fuzz/artifacts fuzz/logs fuzz/work fuzz/corpus
if [ -f fuzz/.asan/asan_with_fuzzer.so ]; then
    run="$here/fuzz/asan.sh"; build=asan+ubsan; instr="${KCODEC_FUZZ_INSTRUMENT:-harness}"
else
    run="$py $here/fuzz/run.py"; build=plain; instr="${KCODEC_FUZZ_INSTRUMENT:-all}"
fi
export KCODEC_FUZZ_INSTRUMENT="$instr"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1:handle_segv=1:malloc_context_size=0}"
opts=(-timeout=10 -rss_limit_mb=3000 -malloc_limit_mb=1024 -print_final_stats=1 "-max_len=${MAX_LEN:-1024}")
if [ -n "$runs" ]; then
    limit=("-runs=$runs"); [ -n "${MAX_SECS:-}" ] && limit+=("-max_total_time=$MAX_SECS")
else
    limit=("-max_total_time=$secs")
fi
commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- kcodec src_c fuzz || echo +dirty)"
tsv=fuzz/logs/campaign.tsv
[ -f "$tsv" ] || printf 'date\tcommit\tbuild\tinstrument\ttarget\texit\texecutions\tseconds\texec_per_s\tcov\tft\tnew_units\tcorpus_files\tcorpus_bytes\tubsan\n' >"$tsv"

one() {
    local t="$1" log="fuzz/logs/$t.$(date -u +%Y%m%dT%H%M%S).log"
    mkdir -p "fuzz/work/$t" "fuzz/corpus/$t"
    PYTHONPATH=. "$py" -m fuzz.seeds fuzz/work "$t" >/dev/null
    cp -n fuzz/corpus/"$t"/* "fuzz/work/$t/" 2>/dev/null
    local t0=$SECONDS
    (cd fuzz/artifacts && PYTHON="$py" nice -n 19 $run "$t" "${limit[@]}" "${opts[@]}" \
        "../work/$t" >"../../$log" 2>&1)
    local rc=$? took=$((SECONDS - t0))
    if [ "${MERGE:-1}" = 1 ]; then
        local fresh="fuzz/work/.min-$t"
        rm -rf "$fresh" && mkdir -p "$fresh"
        (cd fuzz/artifacts && PYTHON="$py" nice -n 19 $run "$t" -merge=1 "${opts[@]}" "../../$fresh" \
            "../work/$t" >"../../${log%.log}.merge.log" 2>&1)
        if [ -n "$(ls -A "$fresh")" ]; then
            rm -rf "fuzz/corpus/$t" && mv "$fresh" "fuzz/corpus/$t"
        fi
    fi
    local n rate done_line
    n="$(grep -h 'stat::number_of_executed_units' "$log" | awk '{print $2}')"
    rate="$(grep -h 'stat::average_exec_per_sec' "$log" | awk '{print $2}')"
    done_line="$(grep -hE '^#[0-9]+' "$log" | tail -1)"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
        "$(date -u +%FT%TZ)" "$commit" "$build" "$instr" "$t" "$rc" "${n:-0}" "$took" "${rate:-0}" \
        "$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$done_line")" \
        "$(sed -n 's/.*ft: \([0-9]*\).*/\1/p' <<<"$done_line")" \
        "$(grep -h 'stat::new_units_added' "$log" | awk '{print $2}')" \
        "$(ls "fuzz/corpus/$t" | wc -l)" "$(cat fuzz/corpus/"$t"/* 2>/dev/null | wc -c)" \
        "$(grep -c 'runtime error' "$log")" >>"$tsv"
    echo "$t: exit $rc, ${n:-0} executions in ${took}s (${rate:-0}/s), corpus $(ls "fuzz/corpus/$t" | wc -l) files, log $log"
}

running=0
for t in $targets; do
    one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$lanes" ]; then wait -n; running=$((running - 1)); fi
done
wait
ls -la fuzz/artifacts | grep -E 'crash|timeout|oom|leak' || echo "no crash artifacts"
grep -h "runtime error" fuzz/logs/*.log | sort | uniq -c || true
