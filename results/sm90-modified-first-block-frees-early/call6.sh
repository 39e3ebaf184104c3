#!/usr/bin/env bash
# Call 6 (log 51): FB (experiment/sm90-modified-first-block-frees-early) against D32B (main's
# sm90 kernels): FB's each-modifier test over every sm90 modified kernel, then
# flash-attn-modifier-timing in the order FB, D32B, FB.
set -u
cd "$(dirname "$0")"
T0=$SECONDS
export FLASH_ATTN_REQUIRE_GPU=1 CUDA_CACHE_PATH=$PWD/cuda-cache
tar xJf bins.tar.xz
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/summary.txt
step() { # name timeout cmd...
  local name=$1 to=$2; shift 2
  local left=$((270 - (SECONDS - T0)))
  [ $left -lt 20 ] && { echo "== $name skipped (no time)" | tee -a $OUT/summary.txt; return; }
  [ $to -gt $left ] && to=$left
  local s=$SECONDS
  timeout $to "$@" > $OUT/$name.txt 2>&1
  echo "== $name exit $? ($((SECONDS - s)) s, t=$((SECONDS - T0)))" | tee -a $OUT/summary.txt
}
step test-FB 80 FB/gpu-tests --exact modifiers::every_sm90_modified_kernel_with_each_modifier
step mods-FB-1 60 FB/flash-attn-modifier-timing
step mods-D32B 60 D32B/flash-attn-modifier-timing
step mods-FB-2 60 FB/flash-attn-modifier-timing
cd $OUT && tar cJf /tmp/out.tar.xz . && rm -rf $OUT/* && mv /tmp/out.tar.xz $OUT/
