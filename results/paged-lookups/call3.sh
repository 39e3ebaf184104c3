#!/usr/bin/env bash
# Log 90, call 3: the sm90 paged kernels' producer at 80 registers (EXP, its consumers 208 at the
# two-consumer tiles) against 48 (OLD, log 89's bundle): the chunked-prefill timing at D=128, 64
# and 256, OLD, EXP, OLD, EXP; then ncu over OLD's D=128 paged kernel on pages of 16 and 256
# keys and its contiguous serving kernel (B=1, 512 queries, 4,096 cached keys; the 11th launch
# of each case, each case 53 launches: 3 warm-ups, 10 repeats of 5).
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
prof() {
  local name=$1 regex=$2 skip=$3
  step ncu-$name 100 ncu --clock-control none --set full \
    --kernel-name "regex:$regex" --launch-skip $skip --launch-count 1 -o "$OUT/$name" \
    OLD/flash-attn-decode-timing --chunked-only --head-dim 128
  ncu --import "$OUT/$name.ncu-rep" --page details > "$OUT/$name-details.txt" 2>&1
  ncu --import "$OUT/$name.ncu-rep" --page raw --csv > "$OUT/$name-raw.csv" 2>&1
  ncu --import "$OUT/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/$name-source.csv" 2>&1
}
prof paged16 'd128_m128_n128_w12_s2_paged_sm90a' 10
prof paged256 'd128_m128_n128_w12_s2_paged_sm90a' 63
prof serving 'd128_m128_n128_w12_s2_serving_sm90a' 10
call_end
