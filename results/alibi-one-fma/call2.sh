#!/usr/bin/env bash
# Call 2: A (ALiBi in one FFMA per score on one-sided blocks) against M2 (main 8573463): A's ALiBi/modifier tests, timing ABA
set -u
cd "$(dirname "$0")"
T0=$SECONDS
export FLASH_ATTN_REQUIRE_GPU=1 CUDA_CACHE_PATH=$PWD/cuda-cache
tar xJf call2-bins.tar.xz
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/summary.txt
step() { # name timeout cmd...
  local name=$1 to=$2; shift 2
  local left=$((580 - (SECONDS - T0)))
  [ $left -lt 20 ] && { echo "== $name skipped (no time)" | tee -a $OUT/summary.txt; return; }
  [ $to -gt $left ] && to=$left
  local s=$SECONDS
  timeout $to "$@" > $OUT/$name.txt 2>&1
  echo "== $name exit $? ($((SECONDS - s)) s, t=$((SECONDS - T0)))" | tee -a $OUT/summary.txt
}
step tests-A-modifiers 120 A/gpu-tests modifiers
step tests-A-alibi 150 A/gpu-tests alibi
step mods-A-1 100 A/flash-attn-modifier-timing
step mods-M2-1 100 M2/flash-attn-modifier-timing
step mods-A-2 100 A/flash-attn-modifier-timing
