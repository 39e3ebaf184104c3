#!/usr/bin/env bash
# Call 3 (BENCHMARKS.md log 77): the modifiers' timing (softcap and ALiBi against plain at the
# anchors, the window) of this change (EXP) and main (MAIN, 8e3542a), both built with every
# kernel, in turn, two runs each.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=400
call_begin EXP
for run in 1 2; do
  for build in EXP MAIN; do
    step mods-$build-$run 90 $build/flash-attn-modifier-timing
  done
done
call_end
