#!/usr/bin/env bash
# Call 3 (branch sm90-three-turns): the GPU tests of the new D=64 three-consumer kernels (dense,
# modified, ALiBi, softcap: every `forward::every_kernel`, `sm90::` and `modifiers::` test with
# the m192 filter) and the sweep; the four sanitizers over the new kernels (dense on odd
# shapes, the modified kernel with each modifier, ALiBi alone, the softcap alone).
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin EXP
( FLASH_ATTN_KERNEL_FILTER=m192 step tests-m192-forward 280 EXP/gpu-tests --test-threads=2 forward::every_kernel ) &
( FLASH_ATTN_KERNEL_FILTER=m192 step tests-m192-sm90 280 EXP/gpu-tests --test-threads=2 sm90:: ) &
( FLASH_ATTN_KERNEL_FILTER=m192 step tests-m192-modifiers 280 EXP/gpu-tests --test-threads=2 modifiers:: ) &
( step tests-sweep 280 EXP/gpu-tests --test-threads=2 sweep:: ) &
for tool in memcheck synccheck initcheck racecheck; do
  ( san $tool m192 sm90::every_sm90_kernel_on_odd_shapes 300
    san $tool m192 modifiers::every_sm90_modified_kernel_with_each_modifier 300 ) &
  ( san $tool m192 modifiers::every_alibi_kernel_with_alibi_alone 300
    san $tool m192 modifiers::every_softcap_kernel_with_the_softcap_alone 300 ) &
done
wait
call_end
