#!/usr/bin/env bash
# Log 92, call 3: `cargo bench` on the GPU after the paged copies' walk (main's kernels at
# 4c8a5d0): criterion's forward and serving benchmarks, the serving one with its new chunked
# prefill over contiguous and paged caches.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=585
call_begin B
step criterion-serving 300 B/serving-bench --bench
step criterion-forward 260 B/forward-bench --bench
call_end
