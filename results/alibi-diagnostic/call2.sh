#!/usr/bin/env bash
# Call 2 (BENCHMARKS.md log 80): where ALiBi's time goes. The modifiers' timing of main
# (MAIN, 4deb16d), of D1 (ALiBi's per-score fused multiply-add left out on the blocks of one
# side of the diagonal: wrong results, a diagnostic) and of D2 (D1 plus one more `wgmma` of
# 16 k columns per block in the ALiBi kernels: the cost of computing the bias by MMA).
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=400
call_begin MAIN
for build in MAIN D1 D2; do
  step mods-$build 70 $build/flash-attn-modifier-timing
done
call_end
