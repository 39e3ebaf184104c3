#!/usr/bin/env bash
# Log 92, call 4: criterion's forward benchmark again at the small grids (B4_H8), whose
# non-causal cases read 1.5-1.8x log 84's in call 3 although their kernels' PTX is main's
# byte for byte: twice, then the serving benchmark's chunked prefill group twice.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=300
call_begin B
step criterion-forward-small-1 60 B/forward-bench --bench B4_H8
step criterion-forward-small-2 60 B/forward-bench --bench B4_H8
step criterion-chunked-1 60 B/serving-bench --bench chunked_prefill
step criterion-chunked-2 60 B/serving-bench --bench chunked_prefill
call_end
