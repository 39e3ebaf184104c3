#!/usr/bin/env bash
# Cross-tile carry (branch cross-tile): CT against MAIN2 (ff284d6, main's sm90 kernels).
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin CT
step walk 150 CT/gpu-tests --test-threads=1 --exact modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms
step sweep-CT-1 60 CT/flash-attn-modifier-timing --window-sweep
step sweep-MAIN2-1 60 MAIN2/flash-attn-modifier-timing --window-sweep
step sweep-CT-2 60 CT/flash-attn-modifier-timing --window-sweep
step sweep-MAIN2-2 60 MAIN2/flash-attn-modifier-timing --window-sweep
step mods 120 CT/gpu-tests --test-threads=1 modifiers::
san memcheck _w12_s2_mod modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms 100
san racecheck _w12_s2_mod modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms 100
call_end
