#!/usr/bin/env bash
# Call 3 (BENCHMARKS.md log 76): timing of the second form (EXP, shipping build) against main
# (MAIN, 66d207e) in turn: the anchors, then the modifiers. One run each (the session's device
# time was nearly spent).
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
export CALL_BUDGET=200
call_begin EXP
for build in EXP MAIN; do
  step anchors-$build 50 $build/flash-attn-timing
done
for build in EXP MAIN; do
  step mods-$build 70 $build/flash-attn-modifier-timing
done
call_end
