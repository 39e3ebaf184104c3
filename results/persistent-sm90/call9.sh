#!/usr/bin/env bash
# Call 9 (log 53, experiment/ws-n64-modified, not landed): the modified twin of D=128's 64-key
# warp-specialised tile (`d128_m128_n64_w12_s2_mod`, persistent): its walk test and small-problem
# test, then the window sweep, which times every D=128 modified kernel (the 128-key one too).
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin N64
export FLASH_ATTN_KERNEL_FILTER=d128_m128_n64_w12_s2_mod
step walk-N64 100 N64/gpu-tests --test-threads=1 --exact modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms
step small-N64 100 N64/gpu-tests --test-threads=1 --exact modifiers::every_modified_kernel_on_a_small_problem
unset FLASH_ATTN_KERNEL_FILTER
step sweep-N64-1 60 N64/flash-attn-modifier-timing --window-sweep
step sweep-N64-2 60 N64/flash-attn-modifier-timing --window-sweep
call_end
