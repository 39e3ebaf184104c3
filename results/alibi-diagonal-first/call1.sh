#!/usr/bin/env bash
# Call 1 (2026-11-27, eighth session): DF (experiment/alibi-diagonal-first 51df5ec) against B
# (main's kernels, 41bea8a): modifier timing ABAB, DF's modifier and ALiBi tests.
set -u
cd "$(dirname "$0")"
T0=$SECONDS
export FLASH_ATTN_REQUIRE_GPU=1 CUDA_CACHE_PATH=$PWD/cuda-cache
R=$PWD/out1; mkdir -p $R
tar xJf call1-bins.tar.xz
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/summary.txt
step() { # name timeout cmd...
  local name=$1 to=$2; shift 2
  local left=$((575 - (SECONDS - T0)))
  [ $left -lt 20 ] && { echo "== $name skipped (no time)" | tee -a $R/summary.txt; return; }
  [ $to -gt $left ] && to=$left
  local s=$SECONDS
  timeout $to "$@" > $R/$name.txt 2>&1
  echo "== $name exit $? ($((SECONDS - s)) s, t=$((SECONDS - T0)))" | tee -a $R/summary.txt
}
step warm-DF 90 DF/gpu-tests modifiers::every_modified_kernel_on_a_small_problem
step mods-DF-1 80 DF/flash-attn-modifier-timing
step mods-B-1 80 B/flash-attn-modifier-timing
step mods-DF-2 80 DF/flash-attn-modifier-timing
step mods-B-2 80 B/flash-attn-modifier-timing
step tests-DF-modifiers 200 DF/gpu-tests modifiers
step tests-DF-alibi 150 DF/gpu-tests alibi
grep -h "test result" $R/tests-*.txt | tee -a $R/summary.txt
echo "t=$((SECONDS - T0))" | tee -a $R/summary.txt
tar cJf $OUT/out1.tar.xz -C $PWD out1
cp $R/summary.txt $OUT/
