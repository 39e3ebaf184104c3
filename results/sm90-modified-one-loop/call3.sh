#!/usr/bin/env bash
# Call 3 (log 51): OC1 (experiment/sm90-modified-one-loop: the sm90 modified overlapped loop in
# one run of run-time mask limits) against D32B (main's sm90 kernels) ABA with
# flash-attn-modifier-timing; FlexAttention's modifier costs (scripts/modifier_peers.py); OC1's
# `modifiers` tests.
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
step mods-OC1-1 75 OC1/flash-attn-modifier-timing
step mods-D32B-1 75 D32B/flash-attn-modifier-timing
step mods-OC1-2 75 OC1/flash-attn-modifier-timing
step flex-peers 200 python3 ../scripts/modifier_peers.py
step tests-OC1-modifiers 170 OC1/gpu-tests modifiers
cd $OUT && tar cJf /tmp/out.tar.xz . && rm -rf $OUT/* && mv /tmp/out.tar.xz $OUT/
