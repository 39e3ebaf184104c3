#!/usr/bin/env bash
# Call 2: bundle AV2 (the 8-warp ALiBi kernels with each warpgroup's own key blocks): the ALiBi
# kernels' test, the default API's ALiBi tests, the four sanitizers, the modifier timing twice.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin AV2
alibi=modifiers::every_alibi_kernel_with_alibi_alone
( step alibi-kernels 300 AV2/gpu-tests --test-threads=2 --exact $alibi ) &
( step combined 300 AV2/gpu-tests --test-threads=3 modifiers::each_modifier_alone_and_combined ) &
( step bit-for-bit 200 AV2/gpu-tests --test-threads=1 --exact modifiers::the_alibi_calls_agree_bit_for_bit ) &
( step back-to-back 200 AV2/gpu-tests --test-threads=1 --exact modifiers::back_to_back_alibi_calls_read_their_own_slopes ) &
for tool in memcheck synccheck initcheck racecheck; do
  ( san $tool _alibi_sm90a $alibi 330 ) &
done
wait
step mods-AV2-1 110 AV2/flash-attn-modifier-timing
step mods-AV2-2 110 AV2/flash-attn-modifier-timing
call_end
