#!/usr/bin/env bash
# Call 1: LV (branch softmax-lane-vote, 05fe21c: the sm90 fold votes on each lane's block
# maxima, the quads' shuffles only where the maxima move) and LVH (LV with a softcap block's
# maxima taken before the cap) against MAIN2 (main's sm90 kernels): LVH's walk test, the
# modifier timing ABCABC, the dense timing and the window sweep AB.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin LVH
step walk-LVH 90 LVH/gpu-tests --test-threads=1 --exact modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms
step mods-LV-1 75 LV/flash-attn-modifier-timing
step mods-MAIN2-1 75 MAIN2/flash-attn-modifier-timing
step mods-LVH-1 75 LVH/flash-attn-modifier-timing
step mods-LV-2 75 LV/flash-attn-modifier-timing
step mods-MAIN2-2 75 MAIN2/flash-attn-modifier-timing
step mods-LVH-2 75 LVH/flash-attn-modifier-timing
step timing-LV 70 LV/flash-attn-timing --json "$OUT/lv.json"
step timing-MAIN2 70 MAIN2/flash-attn-timing --json "$OUT/main2.json"
step sweep-LV 40 LV/flash-attn-modifier-timing --window-sweep
step sweep-MAIN2 40 MAIN2/flash-attn-modifier-timing --window-sweep
call_end
