#!/usr/bin/env bash
# Call 2 (log 55): the D=160 decode timing that call 1 cut (ONE against BASED, ABAB), then
# compute-sanitizer's four tools over the serving and paged kernels of head dim 96 (the sm_90
# cubins ptxas scheduled most differently from the sm_80 PTX) on small caches.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin ONE
step decode160-ONE-1 110 ONE/flash-attn-decode-timing --head-dim 160
step decode160-BASED-1 110 BASED/flash-attn-decode-timing --head-dim 160
kv=kv_cache::every_serving_kernel_on_a_small_cache
pg=paged::every_paged_kernel_on_a_small_cache
san memcheck d96_m64_n64_w4_s3_pad $kv 60 &
san racecheck d96_m64_n64_w4_s3_pad $pg 120 &
wait
san synccheck d96_m64_n64_w4_s3_pad $pg 60 &
san initcheck d96_m64_n64_w4_s3_pad $kv 60 &
wait
call_end
