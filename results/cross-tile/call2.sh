#!/usr/bin/env bash
# Cross-tile carry, second form (CT2: a tile's last V rides with the next tile's first group)
# against MAIN2 (ff284d6, main's sm90 kernels).
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin CT2
step walk 150 CT2/gpu-tests --test-threads=1 --exact modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms
step sweep-CT2-1 60 CT2/flash-attn-modifier-timing --window-sweep
step sweep-MAIN2-1 60 MAIN2/flash-attn-modifier-timing --window-sweep
step sweep-CT2-2 60 CT2/flash-attn-modifier-timing --window-sweep
step sweep-MAIN2-2 60 MAIN2/flash-attn-modifier-timing --window-sweep
step timing-MAIN2 90 MAIN2/flash-attn-timing --json "$OUT/main2.json"
step timing-CT2 90 CT2/flash-attn-timing --json "$OUT/ct2.json"
san memcheck _w12_s2_mod modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms 100
san racecheck _w12_s2_mod modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms 100
call_end
