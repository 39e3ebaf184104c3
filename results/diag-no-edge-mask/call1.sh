#!/usr/bin/env bash
# Call 1 (log 58, a diagnostic): NOEM (branch diag/no-edge-mask: the persistent sm90
# modified kernels skip their mask at S = 8192, at run time) against MAIN2 (main's sm90
# kernels): the window sweep ABAB. What the two masked edge blocks cost a window tile (log 57's
# next step). Run from a devrun/ copy at the repository root, as the other call scripts.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin NOEM
step sweep-NOEM-1 60 NOEM/flash-attn-modifier-timing --window-sweep
step sweep-MAIN2-1 60 MAIN2/flash-attn-modifier-timing --window-sweep
step sweep-NOEM-2 60 NOEM/flash-attn-modifier-timing --window-sweep
step sweep-MAIN2-2 60 MAIN2/flash-attn-modifier-timing --window-sweep
call_end
