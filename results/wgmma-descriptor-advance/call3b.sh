#!/usr/bin/env bash
# Call 3b (BENCHMARKS.md log 72): racecheck over the tiles whose filters call 3 misnamed (they
# matched no kernel, and the tests fail where none is selected): D=64's three-consumer tile and
# the D=160 to D=256 tiles, one process per tile, both tests.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin SHIP
for tile in d64_m192_n d160_m128_n d192_m128_n d224_m128_n d256_m128_n; do
  ( san racecheck $tile sm90::every_sm90_kernel_on_odd_shapes 540
    san racecheck $tile modifiers::every_sm90_modified_kernel_with_each_modifier 540 ) &
done
wait
call_end
