#!/usr/bin/env bash
# Call 4 (a diagnostic): ncu over main's sm90 D=64 kernels (FH2: main's kernels) at
# 4,8,512,64 and 8,16,2048,64 causal, one launch each of the plain problem, the modified kernel
# with every modifier off, the softcap and ALiBi (`--profile-launches`): where the modified
# kernel's own cost on small grids goes.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin FH2
for shape in "4,8,512,64" "8,16,2048,64 --causal"; do
  name=$(echo "$shape" | tr ', ' '_x' | sed 's/x--causal/-causal/')
  step ncu-$name 200 ncu --set full --clock-control none -k regex:flash_fwd --launch-count 4 \
    FH2/flash-attn-modifier-timing --profile-launches --shape $shape
done
call_end
