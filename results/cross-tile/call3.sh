#!/usr/bin/env bash
# Cross-tile carry, third form (CT3: two Q tiles in a walk, the output staged through the
# tile's own) against MAIN2 (ff284d6, main's sm90 kernels).
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin CT3
step walk 150 CT3/gpu-tests --test-threads=1 --exact modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms
step sweep-CT3-1 60 CT3/flash-attn-modifier-timing --window-sweep
step sweep-MAIN2-1 60 MAIN2/flash-attn-modifier-timing --window-sweep
step sweep-CT3-2 60 CT3/flash-attn-modifier-timing --window-sweep
step sweep-MAIN2-2 60 MAIN2/flash-attn-modifier-timing --window-sweep
san memcheck _w12_s2_mod modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms 100
san racecheck _w12_s2_mod modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms 100
call_end
