#!/usr/bin/env bash
# Call 5 (alibi-side, a8d434d): racecheck over the sm90 modified kernels of D=192, D=224 and
# D=256, one process per kernel pair (the rest of call 3's run, after call 4's).
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin AS
sm90=modifiers::every_sm90_modified_kernel_with_each_modifier
for kernel in d192_m128_n64_w8_s2_mod_sm90a d224_m128_n64_w8_s1_mod_sm90a d256_m128_n64_w8_s1_mod_sm90a; do
  ( san racecheck $kernel $sm90 330 ) &
done
wait
call_end
