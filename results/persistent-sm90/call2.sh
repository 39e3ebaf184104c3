#!/usr/bin/env bash
# Call 2 (log 52): PS2 (persistent-sm90, second form: the output staged in a tile of its own,
# one block per tile for causal masking) against BASE (main 6a309c2): PS2's walk tests, then
# flash-attn-modifier-timing ABA, flash-attn-timing AB and PS2's window sweep.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin PS2
step tests-PS2-walk 150 PS2/gpu-tests --test-threads=1 --exact sm90::every_persistent_kernel_over_more_tiles_than_sms
walk=$(tail -1 $OUT/summary.txt)
step tests-PS2-walk-mod 100 PS2/gpu-tests --test-threads=1 --exact modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms
case "$walk" in *"exit 124"*) echo "== PS2 hung: no timing" | tee -a $OUT/summary.txt ;;
*)
step mods-PS2-1 75 PS2/flash-attn-modifier-timing
step mods-BASE-1 75 BASE/flash-attn-modifier-timing
step mods-PS2-2 75 PS2/flash-attn-modifier-timing
step timing-PS2 70 PS2/flash-attn-timing
step timing-BASE 70 BASE/flash-attn-timing
step sweep-PS2 80 PS2/flash-attn-modifier-timing --window-sweep
;;
esac
call_end
