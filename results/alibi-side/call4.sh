#!/usr/bin/env bash
# Call 4 (alibi-side, a8d434d): racecheck over the sm90 modified kernels of D=64, D=128 and
# D=160, one process per kernel pair (call 3's single run over all of them did not finish in
# 420 s).
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin AS
sm90=modifiers::every_sm90_modified_kernel_with_each_modifier
for kernel in d64_m128_n128_w12_s2_mod_sm90a d64_m128_n64_w8_s2_mod_sm90a d128_m128_n128_w12_s2_mod_sm90a d160_m128_n64_w8_s2_mod_sm90a; do
  ( san racecheck $kernel $sm90 360 ) &
done
wait
call_end
