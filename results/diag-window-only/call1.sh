#!/usr/bin/env bash
# Call 1 (log 58, a diagnostic): WONLY (branch diag/window-only: the sm90 modified kernels
# with no softcap or ALiBi code) against MAIN2 (main's sm90 kernels): the window sweep ABAB
# and the modifier timing once each (its softcap and ALiBi rows mean nothing for WONLY).
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin WONLY
step sweep-WONLY-1 60 WONLY/flash-attn-modifier-timing --window-sweep
step sweep-MAIN2-1 60 MAIN2/flash-attn-modifier-timing --window-sweep
step sweep-WONLY-2 60 WONLY/flash-attn-modifier-timing --window-sweep
step sweep-MAIN2-2 60 MAIN2/flash-attn-modifier-timing --window-sweep
step mods-WONLY-1 75 WONLY/flash-attn-modifier-timing
step mods-MAIN2-1 75 MAIN2/flash-attn-modifier-timing
call_end
