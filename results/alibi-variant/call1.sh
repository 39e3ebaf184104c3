#!/usr/bin/env bash
# Call 1: the ALiBi kernels (branch alibi-variant, bundle AV): their GPU test, the default
# API's ALiBi tests, the four sanitizers over the ALiBi kernels, then the modifier timing twice.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin AV
alibi=modifiers::every_alibi_kernel_with_alibi_alone
( step alibi-kernels 300 AV/gpu-tests --test-threads=2 --exact $alibi ) &
( step modifiers-default 300 AV/gpu-tests --test-threads=2 --exact \
    modifiers::each_modifier_alone_and_combined_fp16 modifiers::each_modifier_alone_and_combined_bf16 \
    modifiers::the_alibi_calls_agree_bit_for_bit modifiers::back_to_back_alibi_calls_read_their_own_slopes \
    modifiers::errors_come_before_any_launch modifiers::explicit_strides_with_modifiers_are_honoured ) &
for tool in memcheck synccheck initcheck racecheck; do
  ( san $tool _alibi_sm90a $alibi 330 ) &
done
( FLASH_ATTN_KERNEL_FILTER=no_such_kernel step empty-filter-must-fail 60 AV/gpu-tests --test-threads=1 --exact $alibi ) &
wait
step mods-AV-1 110 AV/flash-attn-modifier-timing
step mods-AV-2 110 AV/flash-attn-modifier-timing
call_end
