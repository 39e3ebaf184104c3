#!/usr/bin/env bash
# Call 2 (log 51): D32B (land/d32-four-blocks: D=32 modified, serving, serving-modified and
# paged-modified kernels at four blocks per SM) against B32 (the same tree with main's launch
# bounds) ABBA: decode, paged decode, modified decode and varlen prefill at D=32; then D32B's
# whole suite beside the four sanitizer tools over its D=32 serving kernels.
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
step decode-D32B-1 70 D32B/flash-attn-decode-timing --head-dim 32
step decode-B32-1 70 B32/flash-attn-decode-timing --head-dim 32
step decode-B32-2 70 B32/flash-attn-decode-timing --head-dim 32
step decode-D32B-2 70 D32B/flash-attn-decode-timing --head-dim 32
step d32-D32B 40 D32B/flash-attn-modifier-timing --every-tile --shape 16,16,512,32
san() { # tool filter test
  FLASH_ATTN_KERNEL_FILTER=$2 timeout 200 compute-sanitizer --tool $1 --error-exitcode 1 D32B/gpu-tests --test-threads=1 --exact $3 > $OUT/san-$1-${3%%::*}.log 2>&1
  echo "== san $1 $2 $3 exit $? (t=$((SECONDS - T0)))" | tee -a $OUT/summary.txt
}
( for tool in memcheck synccheck initcheck racecheck; do
    san $tool d32_m64_n64_w4_s3_pad_serving kv_cache::every_serving_kernel_on_a_small_cache
    san $tool d32_m64_n64_w4_s3_pad_serving varlen::every_serving_kernel_on_a_small_ragged_batch
    san $tool d32_m64_n64_w4_s3_pad varlen_cache::every_cache_kernel_on_a_small_batch
  done ) &
step tests-D32B 330 D32B/gpu-tests
wait
cd $OUT && tar cJf /tmp/out.tar.xz . && rm -rf $OUT/* && mv /tmp/out.tar.xz $OUT/
