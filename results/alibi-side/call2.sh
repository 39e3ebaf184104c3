#!/usr/bin/env bash
# Call 2 (alibi-side, with the timing tool's --every-tile extended to the single-modifier
# kernels): ALiBi and the softcap on each D=64 tile's kernels, and the modifier timing once
# more in the order MAIN, AS (the 8-warp modified kernel's rows with every modifier off).
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin AS
step every-tile-d64 300 AS/flash-attn-modifier-timing --every-tile --head-dim 64
step mods-MAIN-3 110 MAIN/flash-attn-modifier-timing
step mods-AS-3 110 AS/flash-attn-modifier-timing
call_end
