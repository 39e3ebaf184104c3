#!/usr/bin/env bash
# Call 3 (BENCHMARKS.md log 75): the modifiers' timing (softcap and ALiBi against plain at the
# anchors, the window) of this change (EXP, shipping build) and main (MAIN, 13b818d) in turn.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin EXP
for run in 1 2 3; do
  for build in EXP MAIN; do
    step mods-$build-$run 90 $build/flash-attn-modifier-timing
  done
done
call_end
