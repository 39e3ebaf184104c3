#!/usr/bin/env bash
# Call 5: b693a07's sm90 modified tests (their selection through selected_kernels), in kernel
# shards, and the same selection under a filter that names no kernel (must fail).
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin SEL
mods=modifiers::every_sm90_modified_kernel_with_each_modifier
pers=modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms
( step persistent 240 SEL/gpu-tests --test-threads=1 --exact $pers ) &
for i in 0 1 2; do
  ( FLASH_ATTN_KERNEL_SHARD=$i/3 step mods-shard-$i 240 SEL/gpu-tests --test-threads=1 --exact $mods ) &
done
( FLASH_ATTN_KERNEL_FILTER=no_such_kernel step empty-filter-must-fail 60 SEL/gpu-tests --test-threads=1 --exact $mods ) &
wait
call_end
