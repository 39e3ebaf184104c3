#!/usr/bin/env bash
# Call 3 (log 52): PS3 (persistent-sm90, the form that lands: the modified warp-specialised
# kernels persistent, the dense ones as on main) against BASE (main 6a309c2) with
# flash-attn-modifier-timing AB (its plain rows: the dense kernels); then PS3's whole GPU suite beside the four sanitizer tools
# over the persistent modified kernels' walk test.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin PS3
step mods-PS3 75 PS3/flash-attn-modifier-timing
step mods-BASE 75 BASE/flash-attn-modifier-timing
( san memcheck f16_d128_m128_n128_w12_s2_mod modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms 150
  san initcheck f16_d64_m128_n128_w12_s2_mod modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms 100
  san synccheck f16_d128_m128_n128_w12_s2_mod modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms 100
  san racecheck f16_d64_m128_n128_w12_s2_mod modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms 150 ) &
step tests-PS3 360 PS3/gpu-tests
wait
call_end
