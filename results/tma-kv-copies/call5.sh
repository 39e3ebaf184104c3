#!/usr/bin/env bash
# Call 5 (BENCHMARKS.md log 74): what call 4 cut: every 4-warp sm90 dense kernel of the search
# space on odd shapes (its TMA kernels among them), and the edge case of running maxima on the
# shipping 8-warp D=64 and D=256 tiles. The binaries are call 2's.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
export CALL_BUDGET=395
call_begin ALL
FLASH_ATTN_KERNEL_FILTER=_w4_s step sm90-w4 215 ALL/gpu-tests --test-threads=1 --exact sm90::every_sm90_kernel_on_odd_shapes
FLASH_ATTN_KERNEL_FILTER=m128_n64_w8_s2_sm90a step running-maxima 160 ALL/gpu-tests --test-threads=1 --exact edge_cases::running_maxima_that_grow_at_every_key_block
call_end
