#!/usr/bin/env bash
# Call 3: what call 2 left (two varlen_cache tests, whose kernels LV did not change) and the
# four sanitizer tools over LV's shipping sm90 kernels, dense (wave 1,
# forward::every_kernel_on_a_small_problem) and modified (wave 2,
# modifiers::every_modified_kernel_on_a_small_problem), four processes at a time.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin LV
dense=forward::every_kernel_on_a_small_problem
modified=modifiers::every_modified_kernel_on_a_small_problem
( step varlen-cache-left 300 LV/gpu-tests --test-threads=2 varlen_cache::chunked_prefill_ ) &
( san memcheck d128_m128_n128_w12_s2_sm90a $dense 240 ) &
( san racecheck d64_m128_n128_w12_s2_sm90a $dense 240 ) &
( san synccheck m128_n64_w8_s2_sm90a $dense 240 ) &
( san initcheck d128_m128_n128_w12_s2_sm90a $dense 240 ) &
wait
( san memcheck w12_s2_mod_sm90a $modified 240 ) &
( san racecheck f16_d128_m128_n128_w12_s2_mod $modified 240 ) &
( san synccheck w8_s2_mod_sm90a $modified 240 ) &
( san initcheck d64_m128_n128_w12_s2_mod $modified 240 ) &
wait
call_end
