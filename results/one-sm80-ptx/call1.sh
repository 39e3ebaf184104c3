#!/usr/bin/env bash
# Call 1 (log 55): ONE (branch build-one-sm80-ptx: the sm80 family's cubins assembled from the
# sm_80 PTX, no sm_89 PTX) against BASED (main's flash-attn-decode-timing): the cubin/JIT loading
# test both ways, the serving GPU tests (the sm80 family's serving and paged kernels, whose sm_90
# SASS ptxas scheduled differently for 32 of them), then decode and varlen-prefill timing ABAB
# at head dims 96 and 64 (the most changed kernels) and 160.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin ONE
load=forward::kernels_load_from_cubins_where_built_and_from_ptx_when_forced
step load-default 120 ONE/gpu-tests --test-threads=1 --exact $load
step load-sm80-jit 90 env FLASH_ATTN_PTX_TARGET=sm_80 FLASH_ATTN_FORCE_PTX=1 ONE/gpu-tests --test-threads=1 --exact $load
for t in kv_cache paged varlen varlen_cache alibi_serving; do
  timeout 220 ONE/gpu-tests --test-threads=2 "$t::" > $OUT/tests-$t.txt 2>&1 &
done
wait
for t in kv_cache paged varlen varlen_cache alibi_serving; do
  echo "== tests $t: $(grep 'test result' $OUT/tests-$t.txt | tail -1) (t=$((SECONDS - T0)))" | tee -a $OUT/summary.txt
done
step decode96-ONE-1 70 ONE/flash-attn-decode-timing --head-dim 96
step decode96-BASED-1 70 BASED/flash-attn-decode-timing --head-dim 96
step decode64-ONE-1 70 ONE/flash-attn-decode-timing --head-dim 64
step decode64-BASED-1 70 BASED/flash-attn-decode-timing --head-dim 64
step decode96-ONE-2 70 ONE/flash-attn-decode-timing --head-dim 96
step decode96-BASED-2 70 BASED/flash-attn-decode-timing --head-dim 96
step decode160-ONE-1 70 ONE/flash-attn-decode-timing --head-dim 160
step decode160-BASED-1 70 BASED/flash-attn-decode-timing --head-dim 160
call_end
