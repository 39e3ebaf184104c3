#!/usr/bin/env bash
# Call 5: SL (branch sm80-lane-vote: LV's vote in the sm80 fold, OnlineSoftmax::update, too)
# against MAIN2: the sm80 tables' D=64 and D=128 dense kernels at the anchor shapes, ABAB.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
export CALL_BUDGET=270
call_begin SL
for pass in 1 2; do
  for k in f16_d64_m128_n64_w4_s3 f16_d64_m64_n64_w4_s3 f16_d128_m128_n64_w4_s1_qsmem f16_d128_m64_n64_w4_s2; do
    step $k-SL-$pass 30 SL/flash-attn-timing --kernel flash_fwd_$k
    step $k-MAIN2-$pass 30 MAIN2/flash-attn-timing --kernel flash_fwd_$k
  done
done
call_end
