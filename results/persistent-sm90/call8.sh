#!/usr/bin/env bash
# Call 8 (log 53): main after the landing (MAIN2): the GPU suite's modifier tests (the walk
# test and the small-problem test now share `check_on_kernel`), flash-attn-modifier-timing, and
# the peers of the window and the modifiers in the same call: SDPA with the window as an
# explicit mask (peer_compare.py --window) and FlexAttention (modifier_peers.py).
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin MAIN2
step mods-MAIN2 75 MAIN2/flash-attn-modifier-timing
step window-peers 120 python3 ../scripts/peer_compare.py --window
step flex-peers 200 python3 ../scripts/modifier_peers.py
step tests-MAIN2-modifiers 180 MAIN2/gpu-tests --test-threads=2 modifiers
call_end
