#!/usr/bin/env bash
# Call 3: (a) synccheck over SL's sm80 serving kernels (call 2's filter named none of the
# modified serving kernels that test runs); (b) EF (branch ex2-on-fma: the sm90 softcap folds
# take half their ex2s on the FMA pipe) through every modifiers:: test, the sm90 modified one
# in two kernel shards; then (c) the modifier timing ABAB, EF against LV (main's sm90 PTX).
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin SL
mods=modifiers::every_sm90_modified_kernel_with_each_modifier
( san synccheck w4_s kv_cache::every_serving_kernel_on_a_small_cache 200 ) &
( step ef-modifiers-rest 200 EF/gpu-tests --test-threads=2 --skip $mods modifiers:: ) &
for i in 0 1; do
  ( FLASH_ATTN_KERNEL_SHARD=$i/2 step ef-mods-shard-$i 200 EF/gpu-tests --test-threads=1 --exact $mods ) &
done
wait
step mods-EF-1 75 EF/flash-attn-modifier-timing
step mods-LV-1 75 LV/flash-attn-modifier-timing
step mods-EF-2 75 EF/flash-attn-modifier-timing
step mods-LV-2 75 LV/flash-attn-modifier-timing
call_end
