#!/usr/bin/env bash
# Call 1 (log 58): SCHED (the tile order: a window's ramp last, snaking rounds) against MAIN2
# (main's kernels): the window sweep and the modifier timing ABAB, then SCHED's walk test
# and small-problem test. Run from a devrun/ copy at the repository root.
# Its test step passed two names to a harness that takes one filter, and so ran no test (log 58).
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin SCHED
step sweep-SCHED-1 60 SCHED/flash-attn-modifier-timing --window-sweep
step sweep-MAIN2-1 60 MAIN2/flash-attn-modifier-timing --window-sweep
step sweep-SCHED-2 60 SCHED/flash-attn-modifier-timing --window-sweep
step sweep-MAIN2-2 60 MAIN2/flash-attn-modifier-timing --window-sweep
step mods-SCHED-1 75 SCHED/flash-attn-modifier-timing
step mods-MAIN2-1 75 MAIN2/flash-attn-modifier-timing
step mods-SCHED-2 75 SCHED/flash-attn-modifier-timing
step tests-SCHED-walk 150 SCHED/gpu-tests --test-threads=2 --exact \
    modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms \
    modifiers::every_modified_kernel_on_a_small_problem
call_end
