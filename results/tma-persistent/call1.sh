#!/usr/bin/env bash
# Call 1 (BENCHMARKS.md log 78; the session's sixth call): the persistent modified sm90 kernels copy by TMA too, their
# producer at 40 registers beside consumers of 232 (branch tma-persistent). Their walk test
# and each modifier on them, the four sanitizers over the walk test; then the modifiers'
# timing of this build (EXP) and main (MAIN, 1987c4b), once each.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=215
call_begin ALL
( FLASH_ATTN_KERNEL_FILTER=_w12_s2_mod step walk 100 ALL/gpu-tests --test-threads=1 --exact modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms ) &
( FLASH_ATTN_KERNEL_FILTER=_w12_s2_mod step each-modifier 100 ALL/gpu-tests --test-threads=1 --exact modifiers::every_sm90_modified_kernel_with_each_modifier ) &
for tool in memcheck synccheck initcheck racecheck; do
  ( san $tool _w12_s2_mod modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms 100 ) &
done
wait
for build in EXP MAIN; do
  step mods-$build 55 $build/flash-attn-modifier-timing
done
call_end
