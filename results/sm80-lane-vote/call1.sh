#!/usr/bin/env bash
# Call 1: SL's GPU suite (branch sm80-lane-vote: the sm80 fold, OnlineSoftmax::update, votes on
# each lane's block maxima; every kernel of the space, FLASH_ATTN_REQUIRE_GPU=1) in parallel
# processes: the suite without the sm90-only tests (their PTX is byte-identical to LV's, which
# passed them: the gate's sm_90a digests did not move) and without the two varlen_cache
# chunked-prefill tests, which run beside it.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin SL
odd=sm90::every_sm90_kernel_on_odd_shapes
mods=modifiers::every_sm90_modified_kernel_with_each_modifier
pers=modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms
( step suite-rest 560 SL/gpu-tests --test-threads=4 --skip $odd --skip $mods --skip $pers --skip varlen_cache::chunked_prefill_ ) &
( step varlen-cache-chunked 560 SL/gpu-tests --test-threads=2 varlen_cache::chunked_prefill_ ) &
wait
call_end
