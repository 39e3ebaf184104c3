#!/usr/bin/env bash
# Call 2 (BENCHMARKS.md log 72): timing, EXP (this change, shipping build) against MAIN (main's
# a17e91c, shipping build), in turn: the anchors through the default API (EXP, MAIN, EXP,
# MAIN), the modifier timing (the same order), the window sweep at 2,16,8192,128 and the head
# dims of the issue (4,16,2048,256 and 8,16,2048,96), each once per build.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin EXP
for run in 1 2; do
  step anchors-EXP-$run 60 EXP/flash-attn-timing
  step anchors-MAIN-$run 60 MAIN/flash-attn-timing
done
for run in 1 2; do
  step mods-EXP-$run 90 EXP/flash-attn-modifier-timing
  step mods-MAIN-$run 90 MAIN/flash-attn-modifier-timing
done
for build in EXP MAIN; do
  for shape in 4,16,2048,256 8,16,2048,96; do
    step dims-$shape-$build 40 $build/flash-attn-timing --shape $shape
  done
done
for build in EXP MAIN; do
  step window-$build 60 $build/flash-attn-modifier-timing --window-sweep
done
call_end
