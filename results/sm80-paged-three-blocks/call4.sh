#!/usr/bin/env bash
# Call 4 (log 51): P3 (experiment/sm80-d64-d96-paged-three-blocks: the paged kernels of D=64 and
# D=96 and the paged-modified one of D=64 at three blocks per SM) against D32B (main's kernels
# there) with flash-attn-decode-timing at D=64 (ABBA) and D=96 (AB); FlexAttention's modifier
# costs (scripts/modifier_peers.py) beside ours (D32B flash-attn-modifier-timing); then P3's
# paged and cache tests beside the four sanitizer tools over its D=64 and D=96 paged kernels.
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
step decode64-P3-1 45 P3/flash-attn-decode-timing --head-dim 64
step decode64-D32B-1 45 D32B/flash-attn-decode-timing --head-dim 64
step decode64-D32B-2 45 D32B/flash-attn-decode-timing --head-dim 64
step decode64-P3-2 45 P3/flash-attn-decode-timing --head-dim 64
step decode96-P3-1 45 P3/flash-attn-decode-timing --head-dim 96
step decode96-D32B-1 45 D32B/flash-attn-decode-timing --head-dim 96
step mods-D32B 75 D32B/flash-attn-modifier-timing
step flex-peers 170 python3 ../scripts/modifier_peers.py
san() { # tool filter test
  FLASH_ATTN_KERNEL_FILTER=$2 timeout 150 compute-sanitizer --tool $1 --error-exitcode 1 P3/gpu-tests --test-threads=1 --exact $3 > $OUT/san-$1-$2.log 2>&1
  echo "== san $1 $2 $3 exit $? (t=$((SECONDS - T0)))" | tee -a $OUT/summary.txt
}
( for tool in memcheck synccheck initcheck racecheck; do
    san $tool d64_m64_n64_w4_s3_qsmem_paged paged::every_paged_kernel_on_a_small_cache
    san $tool d96_m64_n64_w4_s3_pad_qsmem_paged paged::every_paged_kernel_on_a_small_cache
  done ) &
step tests-P3-paged 120 P3/gpu-tests paged
step tests-P3-varlen_cache 120 P3/gpu-tests varlen_cache
wait
cd $OUT && tar cJf /tmp/out.tar.xz . && rm -rf $OUT/* && mv /tmp/out.tar.xz $OUT/
