#!/usr/bin/env bash
# Call 1: AR (branch alibi-ramp: ALiBi's bias along the rows through one more wgmma per block in
# the sm90 modified kernels) through every modifiers:: test, the sm90 and persistent ones in
# kernel shards; then the modifier timing ABAB, AR against LV (main's sm90 PTX).
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin AR
mods=modifiers::every_sm90_modified_kernel_with_each_modifier
pers=modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms
( step modifiers-rest 240 AR/gpu-tests --test-threads=2 --skip $mods --skip $pers modifiers:: ) &
for i in 0 1; do
  ( FLASH_ATTN_KERNEL_SHARD=$i/2 step mods-shard-$i 240 AR/gpu-tests --test-threads=1 --exact $mods ) &
done
( step persistent 240 AR/gpu-tests --test-threads=1 --exact $pers ) &
wait
step mods-AR-1 75 AR/flash-attn-modifier-timing
step mods-LV-1 75 LV/flash-attn-modifier-timing
step mods-AR-2 75 AR/flash-attn-modifier-timing
step mods-LV-2 75 LV/flash-attn-modifier-timing
call_end
