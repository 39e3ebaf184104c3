#!/usr/bin/env bash
# Log 90, call 1: the paged copies' page lookups from one load per lane (shfl, EXP) against the
# lookup per row (OLD, log 89's bundle): the chunked-prefill timing over contiguous caches and
# pages of 16 and 256 keys at D=128, 64 and 256, OLD, EXP, OLD, EXP.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
call_begin EXP
for round in 1 2; do
  for bins in OLD EXP; do
    for head_dim in 128 64 256; do
      step timing-$bins-d$head_dim-r$round 60 $bins/flash-attn-decode-timing --chunked-only \
        --head-dim $head_dim --chunked-json "$OUT/$bins-d$head_dim-r$round.json"
    done
  done
done
call_end
