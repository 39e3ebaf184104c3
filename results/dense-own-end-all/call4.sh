#!/usr/bin/env bash
# Log 84's verification, completed: the odd-shape test over the changed tiles' kernels (every
# sm90 dense kernel of the 128-row tiles of 128-key blocks, and of the 64-row tiles; in call 2
# the test over every sm90 kernel was still running at its limit beside the sanitizers), and
# the four sanitizers over it on three more of the changed tiles. Bundle e09f375's gpu-tests in bins.tar.xz (EXP/); carry the
# folder.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=240
call_begin EXP
for filter in _m128_n128_ _m64_n; do
  ( FLASH_ATTN_KERNEL_FILTER=$filter step odd-shapes$filter 230 EXP/gpu-tests --test-threads=1 --exact sm90::every_sm90_kernel_on_odd_shapes ) &
done
for filter in d64_m64_n64_w4_s3_sm90a d160_m128_n128_w8_s2_sm90a d192_m64_n128_w4_s2_sm90a; do
  for tool in memcheck synccheck initcheck racecheck; do
    ( san $tool $filter sm90::every_sm90_kernel_on_odd_shapes 180 ) &
  done
done
wait
call_end
