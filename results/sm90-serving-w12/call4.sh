#!/usr/bin/env bash
# Log 93, call 4: the sm80 D=256 4-warp kernels whose PTX the copy change moved, OLD (main,
# 49723e2) against EXP (b5b59f6), in turns: the dense `m64_n64_w4_s1_qsmem` and
# `m64_n32_w4_s1_qsmem` named at 4,16,2048,256 (f16), and the decode timing at D=256 (the
# serving kernel `m64_n16_w4_s3_qsmem_serving` and the paged one on Hopper's decode steps).
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
call_begin EXP
for round in 1 2; do
  for bins in OLD EXP; do
    for kernel in flash_fwd_f16_d256_m64_n64_w4_s1_qsmem flash_fwd_f16_d256_m64_n32_w4_s1_qsmem; do
      step dense-$bins-${kernel#flash_fwd_f16_d256_}-r$round 60 $bins/flash-attn-timing \
        --kernel $kernel --shape 4,16,2048,256
    done
    step decode-$bins-r$round 120 $bins/flash-attn-decode-timing --head-dim 256
  done
done
call_end
