#!/usr/bin/env bash
# Call 1 (branch alibi-side, a8d434d): ALiBi's one-sided body on every causal block and the
# shared distances across the diagonal. The modifier timing ABAB against main (680507e), both
# default builds; then the GPU tests of every kernel with ALiBi code (an all-kernels build) and
# the four sanitizers over the ALiBi kernels.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin AS
step mods-AS-1 110 AS/flash-attn-modifier-timing
step mods-MAIN-1 110 MAIN/flash-attn-modifier-timing
step mods-AS-2 110 AS/flash-attn-modifier-timing
step mods-MAIN-2 110 MAIN/flash-attn-modifier-timing
( step modifiers 380 AS/gpu-tests --test-threads=4 modifiers:: ) &
( step alibi-serving 380 AS/gpu-tests --test-threads=2 alibi_serving:: ) &
alibi=modifiers::every_alibi_kernel_with_alibi_alone
for tool in memcheck synccheck initcheck racecheck; do
  ( san $tool _alibi_sm90a $alibi 300 ) &
done
wait
call_end
