#!/usr/bin/env bash
# Call 4: the landing build (AV4): the ALiBi kernels' test and the four sanitizers over them,
# the default API's and the cudarc calls' ALiBi tests, the modifier timing twice, and
# FlexAttention's modifier costs (scripts/modifier_peers.py) beside them.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin AV4
alibi=modifiers::every_alibi_kernel_with_alibi_alone
( step alibi-kernels 300 AV4/gpu-tests --test-threads=2 --exact $alibi ) &
( step combined 300 AV4/gpu-tests --test-threads=3 modifiers::each_modifier_alone_and_combined ) &
( step errors 200 AV4/gpu-tests --test-threads=1 --exact modifiers::errors_come_before_any_launch ) &
( step strides 200 AV4/gpu-tests --test-threads=1 --exact modifiers::explicit_strides_with_modifiers_are_honoured ) &
( step bit-for-bit 200 AV4/gpu-tests --test-threads=1 --exact modifiers::the_alibi_calls_agree_bit_for_bit ) &
( step cudarc-alibi 300 AV4/gpu-tests-cudarc --test-threads=2 cudarc_backend::alibi ) &
for tool in memcheck synccheck initcheck racecheck; do
  ( san $tool _alibi_sm90a $alibi 330 ) &
done
wait
step mods-AV4-1 110 AV4/flash-attn-modifier-timing
step mods-AV4-2 110 AV4/flash-attn-modifier-timing
step flex-peers 200 python3 ../scripts/modifier_peers.py
call_end
