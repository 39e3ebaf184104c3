#!/usr/bin/env bash
# Call 1 (main 35f9a9a, the landed LEAN form of log 68): the modifier timing ABAB against
# 680507e (main before log 68), both default builds; then the GPU tests of every kernel with
# ALiBi code in the shipping set, and synccheck, initcheck and racecheck (not run on LEAN in
# log 68) with memcheck over the six ALiBi kernels.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin MAIN
step mods-MAIN-1 110 MAIN/flash-attn-modifier-timing
step mods-BEFORE-1 110 BEFORE/flash-attn-modifier-timing
step mods-MAIN-2 110 MAIN/flash-attn-modifier-timing
step mods-BEFORE-2 110 BEFORE/flash-attn-modifier-timing
( step modifiers 330 MAIN/gpu-tests --test-threads=4 modifiers:: ) &
( step alibi-serving 330 MAIN/gpu-tests --test-threads=2 alibi_serving:: ) &
alibi=modifiers::every_alibi_kernel_with_alibi_alone
for tool in memcheck synccheck initcheck racecheck; do
  ( san $tool _alibi_sm90a $alibi 300 ) &
done
wait
call_end
