#!/usr/bin/env bash
# Call 1 (log 56, a diagnostic): NOEPI (branch diag/no-epilogue: the persistent sm90 modified
# kernels branch over their epilogue's writes, output and logsumexp, at run time) against MAIN2
# (ff284d6, main's sm90 kernels): the window sweep ABAB. What the epilogue costs a tile.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin NOEPI
step sweep-NOEPI-1 60 NOEPI/flash-attn-modifier-timing --window-sweep
step sweep-MAIN2-1 60 MAIN2/flash-attn-modifier-timing --window-sweep
step sweep-NOEPI-2 60 NOEPI/flash-attn-modifier-timing --window-sweep
step sweep-MAIN2-2 60 MAIN2/flash-attn-modifier-timing --window-sweep
call_end
