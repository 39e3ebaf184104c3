#!/usr/bin/env bash
# Call 4 (main c7eefa4's kernels: the test binary of the call 3 build, whose PTX is main's): the
# gap logs 68 and 69 left, racecheck over each sm90 modified kernel of the shipping set on the
# landed ALiBi form (the three-consumer ones were raced in call 3), one process per tile (both
# element types), and over the persistent modified kernels' many-tile test.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin EXP
test=modifiers::every_sm90_modified_kernel_with_each_modifier
for tile in d64_m128_n128_w12_s2_mod d64_m128_n64_w8_s2_mod d96_m128_n64_w8_s2_mod \
    d128_m128_n128_w12_s2_mod d160_m128_n64_w8_s2_mod d192_m128_n64_w8_s2_mod \
    d224_m128_n64_w8_s1_mod d256_m128_n64_w8_s1_mod; do
  ( san racecheck $tile $test 520 ) &
done
( san racecheck _mod_sm90a modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms 520 ) &
wait
call_end
