#!/usr/bin/env bash
# Call 3: bundle AV3 (the ALiBi dense loop in DiagonalFirst order; the 8-warp modified kernels'
# PTX moved): the ALiBi kernels' test, the 8-warp sm90 modified kernels' test, then the
# modifier timing ABAB against AV2.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin AV3
( step alibi-kernels 300 AV3/gpu-tests --test-threads=2 --exact modifiers::every_alibi_kernel_with_alibi_alone ) &
( FLASH_ATTN_KERNEL_FILTER=m128_n64_w8_s2_mod_sm90a step mods-w8 300 AV3/gpu-tests --test-threads=3 --exact modifiers::every_sm90_modified_kernel_with_each_modifier ) &
wait
step mods-AV3-1 110 AV3/flash-attn-modifier-timing
step mods-AV2-1 110 AV2/flash-attn-modifier-timing
step mods-AV3-2 110 AV3/flash-attn-modifier-timing
step mods-AV2-2 110 AV2/flash-attn-modifier-timing
call_end
