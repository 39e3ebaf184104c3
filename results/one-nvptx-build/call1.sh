#!/usr/bin/env bash
# Call 1 (BENCHMARKS.md log 71): the GPU tests of loading and running every kernel, through a
# build (FLASH_ATTN_KERNELS=all) made by one nvptx build for both families (commit d5e8be1's
# tree; every entry's PTX byte-identical to main's, so the kernels are main's), and the anchors
# through the default API as a smoke check of the cubins it assembled.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin NEW
for group in forward sm90 errors safety edge_cases; do
  step tests-$group 300 NEW/gpu-tests --test-threads=2 $group::
done
step anchors 120 NEW/flash-attn-timing
call_end
