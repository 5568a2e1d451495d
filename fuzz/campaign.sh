#!/usr/bin/env bash
# A fuzzing campaign over every target (or the ones named), then a minimized corpus each:
#
#   fuzz/campaign.sh --runs N [TARGET ...]     N executions per target (libFuzzer -runs=N)
#   fuzz/campaign.sh SECONDS [TARGET ...]      SECONDS per target (-max_total_time)
#
# Each execution runs the compiled AND the pure twin on the input (fuzz/targets.py), so with
# the ASan + UBSan build (fuzz/build_asan.sh, in fuzz/.asan or ASAN_TREE) every execution
# counts both as an ASan execution and as a differential one. Without that build the in-place
# extension is used (differential only). Targets run one after the other at nice 19
# (LANES=2 runs two at a time). The working corpus OUT/work/<target> starts from the
# committed corpus fuzz/corpus/<target> and the code-made seeds; afterwards libFuzzer's
# -merge=1 keeps the inputs that add coverage and they replace fuzz/corpus/<target>
# (MERGE=0: the committed corpus is only read). Logs in OUT/logs/, crashes in OUT/artifacts/,
# and one line per target run in OUT/logs/campaign.tsv: commit, build, executions, seconds,
# exec/s, coverage, corpus, UBSan reports. OUT is fuzz/ (git-ignored parts) unless FUZZ_OUT.
#
# Knobs (environment): MAX_LEN (longest input, default 1024), MAX_SECS (a wall-clock cap
# for --runs, default none), TIMEOUT (libFuzzer's -timeout per input, default 10 s; set it
# above KCODEC_FUZZ_BROKER_WAIT_S where that is raised), KCODEC_FUZZ_INSTRUMENT (Python
# coverage: all, harness, none;
# default none with the ASan build, whose C coverage of the compiled twins guides the search
# (atheris's Python instrumentation made each execution 8x slower there); all without it),
# MERGE_INSTRUMENT (Python coverage for the merge, default all: an input that only reaches a
# Python branch of the CLI or the client stays in the corpus), PYTHON (default .venv/bin/python), ASAN_OPTIONS (default: no allocation stacks, which made
# ASan's malloc 3-4x cheaper; replay a crash with fuzz/asan.sh and the default options to
# see them).
set -u
# (All in one function, read whole before it runs: editing this file mid-campaign is safe.)
main() {
    local here runs="" secs="" py targets lanes out run build instr commit tsv limit opts t
    here="$(cd "$(dirname "$0")/.." && pwd)"
    if [ "${1:-}" = "--runs" ]; then runs="${2:?--runs N}"; shift 2
    else secs="${1:?--runs N or SECONDS}"; shift; fi
    py="${PYTHON:-$here/.venv/bin/python}"
    cd "$here" || return 1
    targets="${*:-$(PYTHONPATH=. "$py" -c 'from fuzz.targets import TARGETS; print(" ".join(sorted(TARGETS)))')}"
    lanes="${LANES:-1}"
    out="$(mkdir -p "${FUZZ_OUT:-fuzz}" && cd "${FUZZ_OUT:-fuzz}" && pwd)"
    mkdir -p "$out/artifacts" "$out/logs" "$out/work" fuzz/corpus
    export ASAN_TREE="${ASAN_TREE:-$here/fuzz/.asan}"
    if [ -f "$ASAN_TREE/asan_with_fuzzer.so" ]; then
        run="$here/fuzz/asan.sh"; build="asan+ubsan:$(basename "$ASAN_TREE")"
        instr="${KCODEC_FUZZ_INSTRUMENT:-none}"
    else
        run="$py $here/fuzz/run.py"; build=plain; instr="${KCODEC_FUZZ_INSTRUMENT:-all}"
    fi
    export KCODEC_FUZZ_INSTRUMENT="$instr" PYTHON="$py"
    export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1:handle_segv=1:malloc_context_size=0}"
    opts=("-timeout=${TIMEOUT:-10}" -rss_limit_mb=3000 -malloc_limit_mb=1024 -print_final_stats=1
          "-max_len=${MAX_LEN:-1024}")
    if [ -n "$runs" ]; then
        limit=("-runs=$runs"); [ -n "${MAX_SECS:-}" ] && limit+=("-max_total_time=$MAX_SECS")
    else
        limit=("-max_total_time=$secs")
    fi
    commit="$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD -- kcodec src_c \
        'fuzz/*.py' 'fuzz/*.sh' 2>/dev/null || echo +dirty)"
    tsv="$out/logs/campaign.tsv"
    [ -f "$tsv" ] || printf 'date\tcommit\tbuild\tinstrument\ttarget\texit\texecutions\tseconds\texec_per_s\tcov\tft\tnew_units\tcorpus_files\tcorpus_bytes\tubsan\n' >"$tsv"

    one() {
        local t="$1" log rc took t0 n rate last fresh
        log="$out/logs/$t.$(date -u +%Y%m%dT%H%M%S).log"
        mkdir -p "$out/work/$t" "fuzz/corpus/$t"
        PYTHONPATH=. "$py" -m fuzz.seeds "$out/work" "$t" >/dev/null
        cp -n fuzz/corpus/"$t"/* "$out/work/$t/" 2>/dev/null
        t0=$SECONDS
        (cd "$out/artifacts" && nice -n 19 $run "$t" "${limit[@]}" "${opts[@]}" \
            "$out/work/$t" >"$log" 2>&1)
        rc=$?; took=$((SECONDS - t0))
        if [ "${MERGE:-1}" = 1 ]; then
            fresh="$out/work/.min-$t"
            rm -rf "$fresh" && mkdir -p "$fresh"
            (cd "$out/artifacts" && KCODEC_FUZZ_INSTRUMENT="${MERGE_INSTRUMENT:-all}" \
                nice -n 19 $run "$t" -merge=1 "${opts[@]}" "$fresh" \
                "$out/work/$t" >"${log%.log}.merge.log" 2>&1)
            if [ -n "$(ls -A "$fresh")" ]; then
                rm -rf "fuzz/corpus/$t" && mv "$fresh" "fuzz/corpus/$t"
            fi
        fi
        n="$(grep -h 'stat::number_of_executed_units' "$log" | awk '{print $2}')"
        rate="$(grep -h 'stat::average_exec_per_sec' "$log" | awk '{print $2}')"
        last="$(grep -hE '^#[0-9]+' "$log" | tail -1)"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
            "$(date -u +%FT%TZ)" "$commit" "$build" "$instr" "$t" "$rc" "${n:-0}" "$took" \
            "${rate:-0}" "$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")" \
            "$(sed -n 's/.*ft: \([0-9]*\).*/\1/p' <<<"$last")" \
            "$(grep -h 'stat::new_units_added' "$log" | awk '{print $2}')" \
            "$(ls "fuzz/corpus/$t" | wc -l)" "$(cat fuzz/corpus/"$t"/* 2>/dev/null | wc -c)" \
            "$(grep -c 'runtime error' "$log")" >>"$tsv"
        echo "$t: exit $rc, ${n:-0} executions in ${took}s (${rate:-0}/s), log $log"
        return "$rc"
    }

    local running=0 failed=0
    for t in $targets; do
        one "$t" &
        running=$((running + 1))
        if [ "$running" -ge "$lanes" ]; then wait -n || failed=1; running=$((running - 1)); fi
    done
    while [ "$running" -gt 0 ]; do wait -n || failed=1; running=$((running - 1)); done
    ls -la "$out/artifacts" | grep -E 'crash|timeout|oom|leak' || echo "no crash artifacts"
    grep -h "runtime error" "$out"/logs/*.log | sort | uniq -c
    return "$failed"
}
main "$@"
exit
