#!/usr/bin/env bash
# Call 4: the dense timing of LV against MAIN2 again, ABAB, for the spread of call 1's one pair.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin LV
step timing-MAIN2-2 70 MAIN2/flash-attn-timing --json "$OUT/main2-2.json"
step timing-LV-2 70 LV/flash-attn-timing --json "$OUT/lv-2.json"
step timing-MAIN2-3 70 MAIN2/flash-attn-timing --json "$OUT/main2-3.json"
step timing-LV-3 70 LV/flash-attn-timing --json "$OUT/lv-3.json"
call_end
