#!/usr/bin/env bash
# Call 2 (branch sm90-three-consumers-pingpong, 27cae6b): the D=64 warp-specialised tile of three
# consumer warpgroups (m192_n128_w16_s2) against main's two (m128_n128_w12_s2), every dense D=64
# kernel of each build timed in one process (ABAB at 8,16,2048,64), longer sequences, the anchors
# through the default API (the two-consumer kernels' blocks laid out anew: the regression
# check); then the GPU tests (the new kernels filtered, every sm90 kernel of the shipping set)
# and the four sanitizers over the new kernels.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin EXP
step t-EXP-1 60 EXP/flash-attn-timing --all-kernels --shape 8,16,2048,64
step t-MAIN-1 60 MAIN/flash-attn-timing --all-kernels --shape 8,16,2048,64
step t-EXP-2 60 EXP/flash-attn-timing --all-kernels --shape 8,16,2048,64
step t-MAIN-2 60 MAIN/flash-attn-timing --all-kernels --shape 8,16,2048,64
step t-EXP-4096 60 EXP/flash-attn-timing --all-kernels --shape 4,16,4096,64
step t-EXP-8192 90 EXP/flash-attn-timing --all-kernels --shape 2,16,8192,64
step t-EXP-1024 60 EXP/flash-attn-timing --all-kernels --shape 16,16,1024,64
step anchors-EXP 90 EXP/flash-attn-timing
step anchors-MAIN 90 MAIN/flash-attn-timing
( FLASH_ATTN_KERNEL_FILTER=m192 step tests-m192-forward 200 EXP/gpu-tests --test-threads=2 forward::every_kernel ) &
( step tests-sm90 200 EXP/gpu-tests --test-threads=2 sm90:: ) &
( step tests-sweep 200 EXP/gpu-tests --test-threads=2 sweep:: ) &
odd=sm90::every_sm90_kernel_on_odd_shapes
for tool in memcheck synccheck initcheck racecheck; do
  ( san $tool m192 $odd 240 ) &
done
wait
call_end
