#!/usr/bin/env bash
# Call 1 (log 58): SOFT (branch softcap-raw-max: the softcap-only blocks with no mask take
# their rows' maxima from the scores before the cap, the tanh's beside the quads' shuffles)
# against MAIN2 (main's kernels): the modifier timing ABAB, then SOFT's modifier tests.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin SOFT
step mods-SOFT-1 75 SOFT/flash-attn-modifier-timing
step mods-MAIN2-1 75 MAIN2/flash-attn-modifier-timing
step mods-SOFT-2 75 SOFT/flash-attn-modifier-timing
step mods-MAIN2-2 75 MAIN2/flash-attn-modifier-timing
step tests-SOFT-modifiers 230 SOFT/gpu-tests --test-threads=2 modifiers
call_end
