#!/usr/bin/env bash
# Main's kernels (ONE, 06076bf: the last PTX change on main; 31ad161's PTX is the same, the
# gate's digests): the whole GPU suite, four test threads as run.sh's tests phase, then
# memcheck and racecheck over every kernel on a small problem (shard 1 of 4) while time lasts.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin ONE
step suite 470 ONE/gpu-tests --test-threads=4
grep -E "test result|FAILED|panicked" "$OUT/suite.txt" | head -20 | tee -a "$OUT/summary.txt"
call_end
