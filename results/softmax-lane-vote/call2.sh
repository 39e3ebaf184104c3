#!/usr/bin/env bash
# Call 2: LV's whole GPU suite (every kernel of the space, FLASH_ATTN_REQUIRE_GPU=1), in
# parallel processes: the suite without its two longest tests (three test threads), the dense
# sm90 odd-shapes test in three kernel shards and the sm90 modified test in two.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin LV
odd=sm90::every_sm90_kernel_on_odd_shapes
mods=modifiers::every_sm90_modified_kernel_with_each_modifier
( step suite-rest 540 LV/gpu-tests --test-threads=3 --skip $odd --skip $mods ) &
for i in 0 1 2; do
  ( FLASH_ATTN_KERNEL_SHARD=$i/3 step odd-shard-$i 540 LV/gpu-tests --test-threads=1 --exact $odd ) &
done
for i in 0 1; do
  ( FLASH_ATTN_KERNEL_SHARD=$i/2 step mods-shard-$i 540 LV/gpu-tests --test-threads=1 --exact $mods ) &
done
wait
call_end
