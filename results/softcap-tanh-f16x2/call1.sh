#!/usr/bin/env bash
# Call 1: M2 (main 8573463) against T (the softcap's tanh in pairs, tanh.approx.f16x2): timing ABBA, T's modifier tests
set -u
cd "$(dirname "$0")"
T0=$SECONDS
export FLASH_ATTN_REQUIRE_GPU=1 CUDA_CACHE_PATH=$PWD/cuda-cache
tar xJf call1-bins.tar.xz
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
step tests-T-modifiers 150 T/gpu-tests modifiers
step mods-T-1 120 T/flash-attn-modifier-timing
step mods-M2-1 120 M2/flash-attn-modifier-timing
step mods-M2-2 120 M2/flash-attn-modifier-timing
step mods-T-2 120 T/flash-attn-modifier-timing
