#!/usr/bin/env bash
# Log 85, call 2: the timing again (its run-to-run spread), at D=128 and D=64, criterion's
# serving benchmark (the varlen prefill now on the sm90 kernel), then the GPU tests of the
# serving calls the change touched (the KV-cache, paged and ALiBi serving ones). Bundle
# ce4ac53's gpu-tests, flash-attn-decode-timing and serving-bench in bins.tar.xz (EXP/).
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
call_begin EXP
step timing-d128 120 EXP/flash-attn-decode-timing --varlen-json "$OUT/ours-d128.json"
step timing-d64 120 EXP/flash-attn-decode-timing --head-dim 64 --varlen-json "$OUT/ours-d64.json"
step serving-bench 200 EXP/serving-bench --bench
for filter in kv_cache:: paged:: alibi_serving::; do
  ( step tests-$filter 200 EXP/gpu-tests --test-threads=2 $filter ) &
done
wait
call_end
