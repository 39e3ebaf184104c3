#!/usr/bin/env bash
# Call 4 (BENCHMARKS.md log 72): the landed form (EXP: 45a0372's shipping build) against main
# (a17e91c) at 8,16,2048,96, where call 2's one run of each left bf16 causal unsettled, three
# runs each in turn, and at 16,16,512,64 twice each.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin EXP
for run in 1 2 3; do
  for build in EXP MAIN; do
    step d96-$build-$run 40 $build/flash-attn-timing --shape 8,16,2048,96
  done
done
for run in 1 2; do
  for build in EXP MAIN; do
    step d64-$build-$run 40 $build/flash-attn-timing --shape 16,16,512,64
  done
done
call_end
