#!/usr/bin/env bash
# Call 3: FH2's three sm90-only tests in kernel shards (with the sm90 modified test's new
# empty-selection check and the persistent test's ALiBi cases), beside the four sanitizer tools
# over the one-stage sm80 kernels whose SASS the fold's change moved (log 62); then the
# one-stage kernels of D=160 to 256 timed, FH2 against SL (main's sm80 kernels), ABAB.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin FH2
odd=sm90::every_sm90_kernel_on_odd_shapes
mods=modifiers::every_sm90_modified_kernel_with_each_modifier
pers=modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms
dense=forward::every_kernel_on_a_small_problem
( step persistent 240 FH2/gpu-tests --test-threads=1 --exact $pers ) &
for i in 0 1 2; do
  ( FLASH_ATTN_KERNEL_SHARD=$i/3 step odd-shard-$i 240 FH2/gpu-tests --test-threads=1 --exact $odd ) &
done
for i in 0 1; do
  ( FLASH_ATTN_KERNEL_SHARD=$i/2 step mods-shard-$i 240 FH2/gpu-tests --test-threads=1 --exact $mods ) &
done
( san memcheck d256_m64_n32_w4_s1_qsmem $dense 240 ) &
( san racecheck d192_m64_n64_w4_s1 $dense 240 ) &
( san synccheck d160_m128_n64_w8_s1_pad $dense 240 ) &
( san initcheck d128_m128_n64_w4_s1_qsmem $dense 240 ) &
wait
for pass in 1 2; do
  for kd in d160_m64_n32_w4_s1_pad:160 d192_m64_n64_w4_s1:192 d224_m64_n32_w4_s1_pad:224 d256_m64_n32_w4_s1_qsmem:256; do
    k=${kd%:*}; d=${kd#*:}
    step $k-FH2-$pass 25 FH2/flash-attn-timing --kernel flash_fwd_f16_$k --shape 4,16,2048,$d
    step $k-SL-$pass 25 SL/flash-attn-timing --kernel flash_fwd_f16_$k --shape 4,16,2048,$d
  done
done
call_end
