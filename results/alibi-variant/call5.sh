#!/usr/bin/env bash
# Call 5: 239bd8e (AV5: the modifier tests' odd-length problems through one helper): the tests
# that use it, the default API's combinations and the ALiBi and sm90 modified kernels named.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin AV5
( step combined 300 AV5/gpu-tests --test-threads=3 modifiers::each_modifier_alone_and_combined ) &
( step alibi-kernels 300 AV5/gpu-tests --test-threads=2 --exact modifiers::every_alibi_kernel_with_alibi_alone ) &
for i in 0 1 2; do
  ( FLASH_ATTN_KERNEL_SHARD=$i/3 step sm90-mods-$i 300 AV5/gpu-tests --test-threads=1 --exact modifiers::every_sm90_modified_kernel_with_each_modifier ) &
done
wait
call_end
