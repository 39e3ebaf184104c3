#!/usr/bin/env bash
# Call 1 (BENCHMARKS.md log 72): the wgmma descriptors advanced from each tile's (every sm90
# kernel's PTX changed). The GPU tests over the build with every kernel (ALL: forward, sm90,
# modifiers filtered to the sm90 family; sweep, edge cases, errors, safety) and memcheck,
# synccheck and initcheck over the shipping build's sm90 kernels (SHIP, filter `sm90a`).
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin SHIP
( FLASH_ATTN_KERNEL_FILTER=sm90a step tests-forward 400 ALL/gpu-tests --test-threads=2 forward:: ) &
( step tests-sm90 400 ALL/gpu-tests --test-threads=2 sm90:: ) &
( FLASH_ATTN_KERNEL_FILTER=sm90a step tests-modifiers 400 ALL/gpu-tests --test-threads=2 modifiers:: ) &
( step tests-sweep 300 ALL/gpu-tests --test-threads=2 sweep::
  step tests-errors 60 ALL/gpu-tests --test-threads=2 errors::
  step tests-safety 100 ALL/gpu-tests --test-threads=2 safety:: ) &
( step tests-edge_cases 300 ALL/gpu-tests --test-threads=2 edge_cases:: ) &
for tool in memcheck synccheck initcheck; do
  ( san $tool sm90a sm90::every_sm90_kernel_on_odd_shapes 500
    san $tool sm90a modifiers::every_alibi_kernel_with_alibi_alone 300 ) &
  ( san $tool sm90a modifiers::every_sm90_modified_kernel_with_each_modifier 500
    san $tool sm90a modifiers::every_softcap_kernel_with_the_softcap_alone 300 ) &
done
wait
call_end
