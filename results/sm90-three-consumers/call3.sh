#!/usr/bin/env bash
# Call 3 (branch sm90-three-consumers, 76d0ced, the form that keeps the two-consumer PTX): the three-consumer D=64 tile
# (m192_n128_w16_s2) without turns (the two-consumer kernels' PTX byte-identical to main's),
# against main's dispatched kernels, ABAB per shape and element type; call 2's form with the
# three-way ping-pong (PP) beside it once; the peers at two shapes; then the GPU tests of the
# new kernels and the four sanitizers over them.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin EXP
new=flash_fwd_%s_d64_m192_n128_w16_s2_sm90a
w12=flash_fwd_%s_d64_m128_n128_w12_s2_sm90a
w8=flash_fwd_%s_d64_m128_n64_w8_s2_sm90a
for shape in 8,16,2048,64 4,16,4096,64 2,16,8192,64 8,16,1536,64; do
  for dt in f16 bf16; do
    for pass in 1 2; do
      step t-$shape-$dt-EXP-$pass 40 EXP/flash-attn-timing --kernel $(printf $new $dt) --shape $shape
      step t-$shape-$dt-MAIN-$pass 40 MAIN/flash-attn-timing --kernel $(printf $w12 $dt) --shape $shape
    done
  done
  step t-$shape-f16-W8 40 MAIN/flash-attn-timing --kernel $(printf $w8 f16) --shape $shape
  step t-$shape-f16-PP 40 PP/flash-attn-timing --kernel $(printf $new f16) --shape $shape
done
step ours-2048 60 EXP/flash-attn-timing --json $OUT/ours-2048.json --shape 8,16,2048,64
step peers-2048 120 python3 ../scripts/peer_compare.py --ours $OUT/ours-2048.json --out $OUT/peers-2048.json
( FLASH_ATTN_KERNEL_FILTER=m192 step tests-m192-forward 150 EXP/gpu-tests --test-threads=2 forward::every_kernel ) &
( FLASH_ATTN_KERNEL_FILTER=m192 step tests-m192-sm90 150 EXP/gpu-tests --test-threads=2 sm90:: ) &
( step tests-sweep 150 EXP/gpu-tests --test-threads=2 sweep:: ) &
odd=sm90::every_sm90_kernel_on_odd_shapes
for tool in memcheck synccheck initcheck racecheck; do
  ( san $tool m192 $odd 150 ) &
done
wait
call_end
