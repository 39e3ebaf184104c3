#!/usr/bin/env bash
# Call 6: bundle SC (branch softcap-variant: Variant::Softcap): the softcap kernels' test and
# the four sanitizers over them, the default API's softcap tests, the ALiBi kernels' test, the
# modifier timing twice.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin SC
softcap=modifiers::every_softcap_kernel_with_the_softcap_alone
( step softcap-kernels 300 SC/gpu-tests --test-threads=2 --exact $softcap ) &
( step alibi-kernels 300 SC/gpu-tests --test-threads=2 --exact modifiers::every_alibi_kernel_with_alibi_alone ) &
( step combined 300 SC/gpu-tests --test-threads=3 modifiers::each_modifier_alone_and_combined ) &
( step errors 200 SC/gpu-tests --test-threads=1 --exact modifiers::errors_come_before_any_launch ) &
for tool in memcheck synccheck initcheck racecheck; do
  ( san $tool _softcap_sm90a $softcap 330 ) &
done
( FLASH_ATTN_KERNEL_FILTER=no_such_kernel step empty-filter-must-fail 60 SC/gpu-tests --test-threads=1 --exact $softcap ) &
wait
step mods-SC-1 110 SC/flash-attn-modifier-timing
step mods-SC-2 110 SC/flash-attn-modifier-timing
call_end
