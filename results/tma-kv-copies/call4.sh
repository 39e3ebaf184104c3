#!/usr/bin/env bash
# Call 4 (BENCHMARKS.md log 74): the GPU tests call 2 left undone (its sm90:: step ran out of
# time over every sm90 kernel, its errors:: and safety:: step passed libtest two filters):
# every 8-warp and 4-warp sm90 dense kernel of the search space on odd shapes (the TMA ones
# among them), errors::, safety:: and the edge cases on the shipping TMA tiles.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin ALL
FLASH_ATTN_KERNEL_FILTER=_w8_s step sm90-w8 170 ALL/gpu-tests --test-threads=1 --exact sm90::every_sm90_kernel_on_odd_shapes
FLASH_ATTN_KERNEL_FILTER=_w4_s step sm90-w4 120 ALL/gpu-tests --test-threads=1 --exact sm90::every_sm90_kernel_on_odd_shapes
FLASH_ATTN_KERNEL_FILTER=_sm90a step errors 60 ALL/gpu-tests --test-threads=1 errors::
FLASH_ATTN_KERNEL_FILTER=_sm90a step safety 60 ALL/gpu-tests --test-threads=1 safety::
FLASH_ATTN_KERNEL_FILTER=m128_n64_w8_s2_sm90a step edge-cases 120 ALL/gpu-tests --test-threads=1 edge_cases::
call_end
