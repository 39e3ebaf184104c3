#!/usr/bin/env bash
# Call 2: FH2's GPU suite (branch sm80-fold-halves on main 392f437: the sm80 fold through the
# sm90 fold's two halves; every kernel of the space, FLASH_ATTN_REQUIRE_GPU=1) in parallel
# processes: the suite without the three sm90-only tests (call 3 runs them in kernel shards)
# and without the two varlen_cache chunked-prefill tests, which run beside it.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin FH2
odd=sm90::every_sm90_kernel_on_odd_shapes
mods=modifiers::every_sm90_modified_kernel_with_each_modifier
pers=modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms
( step suite-rest 560 FH2/gpu-tests --test-threads=4 --skip $odd --skip $mods --skip $pers --skip varlen_cache::chunked_prefill_ ) &
( step varlen-cache-chunked 560 FH2/gpu-tests --test-threads=2 varlen_cache::chunked_prefill_ ) &
wait
call_end
