#!/usr/bin/env bash
# Log 86, call 2: the timing again, for its run-to-run spread (call 1's dense D=128 batch ran
# 8% faster than log 85's): D=128, D=64, D=128. Call 1's binaries.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
call_begin EXP
step timing-d128-a 150 EXP/flash-attn-decode-timing --varlen-json "$OUT/ours-d128-a.json"
step timing-d64 120 EXP/flash-attn-decode-timing --head-dim 64 --varlen-json "$OUT/ours-d64.json"
step timing-d128-b 150 EXP/flash-attn-decode-timing --varlen-json "$OUT/ours-d128-b.json"
call_end
