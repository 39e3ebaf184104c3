#!/usr/bin/env bash
# Call 1 (log 52): PS (persistent-sm90: the warp-specialised sm90 kernels persistent, one block
# per SM walking its tiles) against BASE (main 6a309c2). PS's tests of the walk first (a hang
# there skips PS's timing), then flash-attn-modifier-timing ABA and flash-attn-timing AB.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin PS
step tests-PS-walk 150 PS/gpu-tests --test-threads=1 --exact sm90::every_persistent_kernel_over_more_tiles_than_sms
walk=$(tail -1 $OUT/summary.txt)
step tests-PS-walk-mod 150 PS/gpu-tests --test-threads=1 --exact modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms
case "$walk" in *"exit 124"*) echo "== PS hung: no timing" | tee -a $OUT/summary.txt ;;
*)
step mods-PS-1 75 PS/flash-attn-modifier-timing
step mods-BASE-1 75 BASE/flash-attn-modifier-timing
step mods-PS-2 75 PS/flash-attn-modifier-timing
step timing-PS 80 PS/flash-attn-timing
step timing-BASE 80 BASE/flash-attn-timing
;;
esac
call_end
