#!/usr/bin/env bash
# Call 3 (a diagnostic, BENCHMARKS.md log 71): ncu's full set over one launch each of the
# dispatched plain kernel at 16,16,512,64 f16 non-causal (the 8-warp sm90 tile, where cuDNN
# leads by 1.12-1.15x), its modified kernel with every modifier off, the softcap and ALiBi
# kernels and the two together (`--profile-launches`): where a 512-token tile's time goes.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin NEW
step ncu-16_16_512_64 300 ncu --set full --clock-control none -k regex:flash_fwd --launch-count 5 \
  NEW/flash-attn-modifier-timing --profile-launches --shape 16,16,512,64
call_end
