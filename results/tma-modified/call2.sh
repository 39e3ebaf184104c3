#!/usr/bin/env bash
# Call 2 (BENCHMARKS.md log 75): racecheck over the new TMA kernels (8-warp tiles), call 1's
# binaries.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin ALL
( san racecheck d64_m128_n64_w8_s2 modifiers::every_sm90_modified_kernel_with_each_modifier 500 ) &
( san racecheck d64_m128_n64_w8_s2 modifiers::every_alibi_kernel_with_alibi_alone 300
  san racecheck d64_m128_n64_w8_s2 modifiers::every_softcap_kernel_with_the_softcap_alone 250 ) &
( san racecheck d192_m128_n64_w8 modifiers::every_sm90_modified_kernel_with_each_modifier 500 ) &
( san racecheck d256_m128_n64_w8 modifiers::every_sm90_modified_kernel_with_each_modifier 500 ) &
wait
call_end
