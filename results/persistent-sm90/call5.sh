#!/usr/bin/env bash
# Call 5 (log 53): PS4 (persistent-sm90 after 'the one-tile kernels derive their tile first':
# the dense kernels' SASS the same instruction count as main's) against BASE (main 6a309c2):
# the walk test, flash-attn-timing ABAB (the dense kernels), flash-attn-modifier-timing AB,
# PS4's window sweep, then the four sanitizer tools over the walk test.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin PS4
walk_test=modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms
step walk-PS4 100 PS4/gpu-tests --test-threads=1 --exact $walk_test
case "$(tail -1 $OUT/summary.txt)" in *"exit 124"*) echo "== PS4 hung: no timing" | tee -a $OUT/summary.txt ;;
*)
step timing-PS4-1 70 PS4/flash-attn-timing
step timing-BASE-1 70 BASE/flash-attn-timing
step timing-PS4-2 70 PS4/flash-attn-timing
step timing-BASE-2 70 BASE/flash-attn-timing
step mods-PS4 75 PS4/flash-attn-modifier-timing
step mods-BASE 75 BASE/flash-attn-modifier-timing
step sweep-PS4 60 PS4/flash-attn-modifier-timing --window-sweep
san memcheck f16_d128_m128_n128_w12_s2_mod $walk_test 90
san initcheck bf16_d64_m128_n128_w12_s2_mod $walk_test 60
san synccheck f16_d128_m128_n128_w12_s2_mod $walk_test 60
san racecheck bf16_d64_m128_n128_w12_s2_mod $walk_test 90
;;
esac
call_end
