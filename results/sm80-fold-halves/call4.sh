#!/usr/bin/env bash
# Call 4: FH (branch sm80-fold-halves: OnlineSoftmax::update written through raise_maxima and
# exponentiate, 638 of 648 sm80 PTX entries changed) against SL (main's sm80 kernels): FH's
# small every-kernel tests of each sm80 kind, then the sm80 tables' D=64 and D=128 dense
# kernels at the anchor shapes, ABAB, as log 60 timed them.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin FH
( step fh-forward-small 150 FH/gpu-tests --test-threads=1 --exact forward::every_kernel_on_a_small_problem ) &
( step fh-modified-small 150 FH/gpu-tests --test-threads=1 --exact modifiers::every_modified_kernel_on_a_small_problem ) &
( step fh-serving-small 150 FH/gpu-tests --test-threads=1 --exact kv_cache::every_serving_kernel_on_a_small_cache ) &
( step fh-paged-small 150 FH/gpu-tests --test-threads=1 --exact paged::every_paged_kernel_on_a_small_cache ) &
wait
for pass in 1 2; do
  for k in f16_d64_m128_n64_w4_s3 f16_d64_m64_n64_w4_s3 f16_d128_m128_n64_w4_s1_qsmem f16_d128_m64_n64_w4_s2; do
    step $k-FH-$pass 30 FH/flash-attn-timing --kernel flash_fwd_$k
    step $k-SL-$pass 30 SL/flash-attn-timing --kernel flash_fwd_$k
  done
done
call_end
