#!/usr/bin/env bash
# Call 1 (log 54): HB (branch half-blocks-2: the warp-specialised modified kernels of 128-key
# blocks compute half of a block where a warpgroup's rows see only that half) against MAIN2
# (ff284d6, main's kernels): HB's walk and small-problem tests, the window sweep ABAB, the
# modifier timing AB, the dense timing AB, then HB's every-modifier test on its halves kernels.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin HB
walk_test=modifiers::every_persistent_modified_kernel_over_more_tiles_than_sms
step walk-HB 100 HB/gpu-tests --test-threads=1 --exact $walk_test
case "$(tail -1 $OUT/summary.txt)" in *"exit 124"*) echo "== HB hung: no timing" | tee -a $OUT/summary.txt ;;
*)
step small-HB 60 env FLASH_ATTN_KERNEL_FILTER=m128_n128_w12_s2_mod HB/gpu-tests --test-threads=1 --exact modifiers::every_modified_kernel_on_a_small_problem
step sweep-HB-1 60 HB/flash-attn-modifier-timing --window-sweep
step sweep-MAIN2-1 60 MAIN2/flash-attn-modifier-timing --window-sweep
step sweep-HB-2 60 HB/flash-attn-modifier-timing --window-sweep
step sweep-MAIN2-2 60 MAIN2/flash-attn-modifier-timing --window-sweep
step mods-HB 75 HB/flash-attn-modifier-timing
step mods-MAIN2 75 MAIN2/flash-attn-modifier-timing
step timing-HB 60 HB/flash-attn-timing
step timing-MAIN2 60 MAIN2/flash-attn-timing
step each-HB 200 env FLASH_ATTN_KERNEL_FILTER=m128_n128_w12_s2_mod HB/gpu-tests --test-threads=1 --exact modifiers::every_sm90_modified_kernel_with_each_modifier
;;
esac
call_end
