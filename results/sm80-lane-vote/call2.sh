#!/usr/bin/env bash
# Call 2: the four sanitizer tools over SL's sm80 kernels, dense (wave 1), modified (wave 2),
# serving and paged (wave 3), four processes at a time; then the three sm90-only tests call 1
# left, in kernel shards, for a whole suite on one binary.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin SL
dense=forward::every_kernel_on_a_small_problem
modified=modifiers::every_modified_kernel_on_a_small_problem
serving=kv_cache::every_serving_kernel_on_a_small_cache
paged=paged::every_paged_kernel_on_a_small_cache
( san memcheck f16_d128_m128_n64_w4_s1_qsmem $dense 120 ) &
( san racecheck f16_d64_m128_n64_w4_s3 $dense 120 ) &
( san synccheck bf16_d64_m64_n64_w4_s3 $dense 120 ) &
( san initcheck f16_d128_m64_n64_w4_s2 $dense 120 ) &
wait
( san memcheck w4_s $modified 150 ) &
( san racecheck f16_d128_m64_n64_w4_s2_mod $modified 150 ) &
( san synccheck d64_m128_n64_w4_s3_mod $modified 150 ) &
( san initcheck d256_m128_n32_w8_s1_qsmem_mod $modified 150 ) &
wait
( san memcheck w4_s $serving 120 ) &
( san racecheck d64_m64_n64_w4_s3_qsmem_paged $paged 120 ) &
( san synccheck d128_m64_n64_w4_s2_serving $serving 120 ) &
( san initcheck w4_s $paged 120 ) &
wait
odd=sm90::every_sm90_kernel_on_odd_shapes
mods=modifiers::every_sm90_modified_kernel_with_each_modifier
pers=modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms
( step persistent 200 SL/gpu-tests --test-threads=1 --exact $pers ) &
for i in 0 1 2; do
  ( FLASH_ATTN_KERNEL_SHARD=$i/3 step odd-shard-$i 240 SL/gpu-tests --test-threads=1 --exact $odd ) &
done
for i in 0 1; do
  ( FLASH_ATTN_KERNEL_SHARD=$i/2 step mods-shard-$i 240 SL/gpu-tests --test-threads=1 --exact $mods ) &
done
wait
call_end
