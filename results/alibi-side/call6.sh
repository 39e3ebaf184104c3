#!/usr/bin/env bash
# Call 6 (a diagnostic): ncu's instruction and cycle counts of one launch of each modifier case
# at 16,16,512,64 and 8,16,2048,64 (f16, non-causal, `--profile-launches`), main (MAIN, 680507e)
# against log 68's change (AS): why the 8-warp modified kernel with every modifier off moved.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin AS
metrics=smsp__inst_executed.sum,sm__cycles_elapsed.max,gpu__time_duration.sum,launch__registers_per_thread
for bundle in MAIN AS; do
  for shape in 16,16,512,64 8,16,2048,64; do
    step ncu-$bundle-$shape 150 ncu --clock-control none -k regex:flash_fwd --metrics $metrics --csv $bundle/flash-attn-modifier-timing --profile-launches --shape $shape
  done
done
call_end
