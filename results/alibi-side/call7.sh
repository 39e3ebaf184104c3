#!/usr/bin/env bash
# Call 7 (branch alibi-side-lean): ncu's instruction and cycle counts of one launch of each
# modifier case at 16,16,512,64 and 8,16,2048,64 (f16, non-causal, and 16,16,512,64 causal),
# log 68's change (AS) against its leaner side test (LEAN); then LEAN's GPU tests of every
# kernel with ALiBi code in the shipping set, and memcheck over its ALiBi kernels.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin LEAN
metrics=smsp__inst_executed.sum,sm__cycles_elapsed.max,gpu__time_duration.sum,launch__registers_per_thread
for bundle in AS LEAN; do
  for shape in "16,16,512,64" "8,16,2048,64" "16,16,512,64 --causal"; do
    name=$(echo "$shape" | tr ', ' '_x' | sed 's/x--causal/-causal/')
    step ncu-$bundle-$name 60 ncu --clock-control none -k regex:flash_fwd --metrics $metrics --csv $bundle/flash-attn-modifier-timing --profile-launches --shape $shape
  done
done
( step modifiers 200 LEAN/gpu-tests --test-threads=4 modifiers:: ) &
( step alibi-serving 200 LEAN/gpu-tests --test-threads=2 alibi_serving:: ) &
( san memcheck _alibi_sm90a modifiers::every_alibi_kernel_with_alibi_alone 200 ) &
wait
call_end
