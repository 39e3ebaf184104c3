#!/usr/bin/env bash
# Call 1 (log 51): N64B (experiment/sm90-d128-n64-modified) window sweep; D32
# (experiment/sm80-d32-modified-four-blocks) against M5 (main 0df02ff) ABBA at D=32 modified and
# plain head dims 16/24; then D32's whole suite beside the four sanitizer tools over its D=32
# modified and paged-modified kernels.
set -u
cd "$(dirname "$0")"
T0=$SECONDS
export FLASH_ATTN_REQUIRE_GPU=1 CUDA_CACHE_PATH=$PWD/cuda-cache
tar xJf bins.tar.xz
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/summary.txt
step() { # name timeout cmd...
  local name=$1 to=$2; shift 2
  local left=$((585 - (SECONDS - T0)))
  [ $left -lt 20 ] && { echo "== $name skipped (no time)" | tee -a $OUT/summary.txt; return; }
  [ $to -gt $left ] && to=$left
  local s=$SECONDS
  timeout $to "$@" > $OUT/$name.txt 2>&1
  echo "== $name exit $? ($((SECONDS - s)) s, t=$((SECONDS - T0)))" | tee -a $OUT/summary.txt
}
step window-N64B-1 60 N64B/flash-attn-modifier-timing --window-sweep
step d32-D32-1 60 D32/flash-attn-modifier-timing --every-tile --shape 16,16,512,32
step d32-M5-1 60 M5/flash-attn-modifier-timing --every-tile --shape 16,16,512,32
step d32-M5-2 60 M5/flash-attn-modifier-timing --every-tile --shape 16,16,512,32
step d32-D32-2 60 D32/flash-attn-modifier-timing --every-tile --shape 16,16,512,32
for s in 16,16,1024,16 8,16,2048,24; do
  step plain-D32-$s 40 D32/flash-attn-timing --shape $s
  step plain-M5-$s 40 M5/flash-attn-timing --shape $s
done
step window-N64B-2 60 N64B/flash-attn-modifier-timing --window-sweep
# the suite and the sanitizers (D32)
san() { # tool filter test
  FLASH_ATTN_KERNEL_FILTER=$2 timeout 300 compute-sanitizer --tool $1 --error-exitcode 1 D32/gpu-tests --test-threads=1 --exact $3 > $OUT/san-$1-$2.log 2>&1
  echo "== san $1 $2 exit $? (t=$((SECONDS - T0)))" | tee -a $OUT/summary.txt
}
( for tool in memcheck synccheck initcheck racecheck; do
    san $tool d32_m64_n64_w4_s3_pad_mod modifiers::every_modified_kernel_on_a_small_problem
    san $tool d32_m64_n64_w4_s3_pad_qsmem_paged_mod varlen_cache::every_cache_kernel_on_a_small_batch
  done ) &
step tests-D32 380 D32/gpu-tests
wait
cd $OUT && tar cJf /tmp/out.tar.xz . && rm -rf $OUT/* && mv /tmp/out.tar.xz $OUT/
