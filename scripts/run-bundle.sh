#!/usr/bin/env bash
# Runs the GPU bundle on a machine with an NVIDIA GPU (no Rust needed): GPU tests,
# compute-sanitizer (memcheck, racecheck, synccheck, initcheck), the criterion benchmark, the
# timing of our kernels and the PyTorch SDPA peer comparison. Results go to $OUT (default
# ./results), at most 8 files, with summary.txt last.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$PWD/results}
mkdir -p "$out"
cd "$here"
export FLASH_ATTN_REQUIRE_GPU=1
summary="$out/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

note "bundle $(cat COMMIT) on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), $(date -u +%Y-%m-%dT%H:%MZ)"

# 1. GPU tests against the f64 CPU reference.
./gpu-tests --test-threads=1 2>&1 | tee "$out/gpu-tests.log" | grep -E "^test |test result" 
note "gpu tests: $(grep 'test result' "$out/gpu-tests.log" | tail -n 1)"

# 2. compute-sanitizer: every tool over every kernel on a small problem; memcheck also at the
#    seed shape. Each run must end in "ERROR SUMMARY: 0 errors".
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
for tool in memcheck racecheck synccheck initcheck; do
    run_sanitizer "$tool" forward::every_kernel_on_a_small_problem
done
run_sanitizer memcheck forward::every_kernel_at_the_seed_shape

# 3. The criterion benchmark.
./forward-bench --bench 2>&1 | tee "$out/bench.log" | grep -E "forward_f16|time:|thrpt:"

# 4. Our timings (every kernel), then the peer comparison on the same shapes.
./flash-attn-timing --all-kernels --json "$out/ours.json" 2>&1 | tee "$out/timing.log"
python3 peer_compare.py --ours "$out/ours.json" --out "$out/peers.json" > "$out/peers.log" 2>&1
cat "$out/peers.log" >> "$out/timing.log"
rm "$out/peers.log"
note "$(sed -n '/^B,H,S,D .*causal/,$p' "$out/timing.log")"
