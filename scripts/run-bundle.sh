#!/usr/bin/env bash
# Runs the GPU bundle on a machine with an NVIDIA GPU (no Rust needed): GPU tests,
# compute-sanitizer (memcheck, racecheck, synccheck, initcheck), the criterion benchmark, the
# timing of our kernels and the PyTorch SDPA peer comparison. Results go to $OUT (default
# ./results), at most 8 files, with summary.txt last.
#
# Usage: run.sh [load] [tests] [sanitizer] [bench] [peers] [noise]   (no argument: all, in that order)
#   load:  cold module load time of every kernel (JIT cache disabled), from the embedded cubins
#          and again forced through the PTX JIT, each in a fresh process;
#   tune:  the autotuner (not part of "all": its four output files plus the others would pass
#          the 8 files a device call returns); copy $OUT/dispatch_table.rs over
#          host/src/dispatch_table.rs and commit it;
#   peers: our timings, the PyTorch SDPA comparison, and the regression check against the
#          committed baseline (results/baseline.json, carried as baseline.json);
#   noise: times our kernels a second time and runs the same check against the first pass,
#          which measures the run-to-run noise the check has to see through.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$PWD/results}
mkdir -p "$out"
cd "$here"
export FLASH_ATTN_REQUIRE_GPU=1
summary="$out/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

phases=${*:-load tests sanitizer bench peers noise}
wants() { [[ " $phases " == *" $1 "* ]]; }

note "bundle $(cat COMMIT) on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), $(date -u +%Y-%m-%dT%H:%MZ)"

# 0. Cold load: the driver's on-disk JIT cache is disabled, so every module is compiled.
if wants load; then
    CUDA_CACHE_DISABLE=1 ./flash-attn-load-time > "$out/load-time.log" 2>&1
    load_status=$?
    CUDA_CACHE_DISABLE=1 ./flash-attn-load-time --ptx >> "$out/load-time.log" 2>&1
    note "load time, cubins then forced PTX JIT (exit $load_status, $?):"
    note "$(cat "$out/load-time.log")"
fi

# The autotuner: validates and times every kernel on the tuning sweep, confirms each group's
# winner against its runner-up, and writes the ranked table, JSON, SVG plot and dispatch table.
if wants tune; then
    ./flash-attn-tune --out "$out" > "$out/tune.log" 2>&1
    note "tuner (exit $?):"
    note "$(sed -n '/=== Dispatch table ===/,$p' "$out/tune.log")"
fi

# 1. GPU tests against the f64 CPU reference (the test harness is nightly's, so it can report
#    each test's time).
if wants tests; then
    ./gpu-tests --test-threads=1 -Z unstable-options --report-time 2>&1 | tee "$out/gpu-tests.log" | grep -E "^test |test result"
    note "gpu tests: $(grep 'test result' "$out/gpu-tests.log" | tail -n 1)"
fi

# 2. compute-sanitizer: all four tools over every kernel on small problems (causal and not);
#    memcheck and initcheck over the tail and causal sweep; racecheck and synccheck on rows
#    that see no key (the path that skips the main loop). Each must end in 0 errors.
sanitizer_log="$out/sanitizer.log"
: > "$sanitizer_log"
run_sanitizer() {
    local tool=$1 filter=$2
    echo "=== compute-sanitizer --tool $tool ($filter)" >> "$sanitizer_log"
    compute-sanitizer --tool "$tool" --error-exitcode 1 ./gpu-tests --test-threads=1 --exact "$filter" >> "$sanitizer_log" 2>&1
    local status=$?
    local errors
    errors=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$sanitizer_log" | tail -n 1)
    note "sanitizer $tool $filter: exit $status, $errors"
}
if wants sanitizer; then
    for tool in memcheck racecheck synccheck initcheck; do
        run_sanitizer "$tool" forward::every_kernel_on_a_small_problem
    done
    for tool in racecheck synccheck; do
        run_sanitizer "$tool" edge_cases::rows_that_see_no_key_are_zero_with_minus_infinite_logsumexp
    done
    for tool in memcheck initcheck; do
        run_sanitizer "$tool" sweep::tails_and_causal_fp16
        run_sanitizer "$tool" sweep::tails_and_causal_bf16
    done
    run_sanitizer memcheck forward::every_kernel_at_the_seed_shape
fi

# 3. The criterion benchmark.
if wants bench; then
    ./forward-bench --bench 2>&1 | tee "$out/bench.log" | grep -E "forward_|time:|thrpt:"
fi

# 4. Our timings (every kernel), then the peer comparison on the same shapes.
if wants peers; then
    ./flash-attn-timing --all-kernels --json "$out/ours.json" 2>&1 | tee "$out/timing.log"
    python3 peer_compare.py --ours "$out/ours.json" --out "$out/peers.json" > "$out/peers.log" 2>&1
    cat "$out/peers.log" >> "$out/timing.log"
    rm "$out/peers.log"
    note "$(sed -n '/^B,H,S,D .*causal/,$p' "$out/timing.log")"
    if [ -f baseline.json ]; then
        python3 regression_check.py --baseline baseline.json --current "$out/ours.json" > regression.txt 2>&1
        note "regression check against the committed baseline (exit $?):"
        cat regression.txt >> "$out/timing.log"
        note "$(tail -n 1 regression.txt)"
    fi
fi

# 5. Run-to-run noise: a second pass of our timings, checked against the first.
if wants noise && [ -f "$out/ours.json" ]; then
    ./flash-attn-timing --all-kernels --json repeat.json > /dev/null 2>&1
    python3 regression_check.py --baseline "$out/ours.json" --current repeat.json > noise.txt 2>&1
    note "noise check, second timing pass against the first (exit $?):"
    cat noise.txt >> "$out/timing.log"
    note "$(tail -n 1 noise.txt)"
fi
