#!/usr/bin/env bash
# Call 2 (branch sm90-three-turns, the rotation through `ConsumerTurns`: every shipping
# two-consumer kernel's PTX byte-identical to main's): D=64's three-consumer tile
# (m192_n128_w16_s2) against main's dispatched w12 per shape and element type (ABAB at
# 8,16,2048,64); the modifier timing (the m192 twins at 8,16,2048,64) EXP, MAIN, EXP; the anchors
# through the default API; the peers at 8,16,2048,64.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin EXP
new=flash_fwd_%s_d64_m192_n128_w16_s2_sm90a
w12=flash_fwd_%s_d64_m128_n128_w12_s2_sm90a
for shape in 8,16,2048,64 4,16,4096,64 2,16,8192,64 8,16,1152,64 16,16,1536,64; do
  for dt in f16 bf16; do
    step t-$shape-$dt-EXP-1 40 EXP/flash-attn-timing --kernel $(printf $new $dt) --shape $shape
    step t-$shape-$dt-MAIN-1 40 MAIN/flash-attn-timing --kernel $(printf $w12 $dt) --shape $shape
  done
done
step t-8,16,2048,64-f16-EXP-2 40 EXP/flash-attn-timing --kernel $(printf $new f16) --shape 8,16,2048,64
step t-8,16,2048,64-f16-MAIN-2 40 MAIN/flash-attn-timing --kernel $(printf $w12 f16) --shape 8,16,2048,64
step mods-EXP-1 110 EXP/flash-attn-modifier-timing
step mods-MAIN-1 110 MAIN/flash-attn-modifier-timing
step mods-EXP-2 110 EXP/flash-attn-modifier-timing
step anchors-EXP 90 EXP/flash-attn-timing
step ours-2048 60 EXP/flash-attn-timing --json $OUT/ours-2048.json --shape 8,16,2048,64
step peers-2048 120 python3 ../scripts/peer_compare.py --ours $OUT/ours-2048.json --out $OUT/peers-2048.json
call_end
