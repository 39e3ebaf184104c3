#!/usr/bin/env bash
# Call 5 (main's kernels, the timing binaries of the call 2 build): where else D=64's
# three-consumer tile might run: the buckets the sm_90a table gives the 8-warp tile (S=512 and
# 1024 on large grids) and the small-grid rows that keep the two-consumer tile, each of the
# three tiles named, f16; and every modified tile at 16,16,1024,64 (`--every-tile`). Data for
# the next table change, not a change.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin EXP
for shape in 16,16,1024,64 8,16,1024,64 16,16,768,64 32,16,512,64 16,16,512,64 1,16,2048,64 2,8,4096,64 1,16,8192,64; do
  for k in m192_n128_w16_s2 m128_n128_w12_s2 m128_n64_w8_s2; do
    step t-$shape-$k 40 EXP/flash-attn-timing --kernel flash_fwd_f16_d64_${k}_sm90a --shape $shape
  done
done
step every-tile-16,16,1024,64 200 EXP/flash-attn-modifier-timing --every-tile --shape 16,16,1024,64
call_end
