#!/usr/bin/env bash
# Log 94, call 3: the serving benchmark after `bench_cache_calls` (the decode and chunked
# prefill benches sharing their cache calls): `cargo bench --bench serving`'s binary, the
# chunked prefill and the B=8 decode groups, to see that it runs and names its cases as before.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
call_begin EXP
step bench-chunked 200 EXP/serving --bench B4_512_over_4096
step bench-decode-b8 200 EXP/serving --bench B8_L8192
call_end
