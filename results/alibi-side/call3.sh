#!/usr/bin/env bash
# Call 3 (alibi-side, a8d434d): the four sanitizers over the sm90 modified kernels (their ALiBi
# code moved), memcheck over the sm80 modified serving kernels with ALiBi, racecheck over two of them.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin AS
sm90=modifiers::every_sm90_modified_kernel_with_each_modifier
serving=alibi_serving::every_modified_serving_kernel_with_alibi_on_a_small_batch
for tool in memcheck synccheck initcheck racecheck; do
  ( san $tool _mod_sm90a $sm90 420 ) &
done
( san memcheck _mod $serving 420 ) &
( san racecheck d64_m64_n64_w4_s3_serving_mod $serving 420 ) &
( san racecheck d128_m64_n32_w4_s3_qsmem_paged_mod $serving 420 ) &
wait
call_end
