#!/usr/bin/env bash
# Call 5: racecheck over every sm90 modified kernel with each modifier (B: main's and the new D=64
# ones), in 7 kernel shards at once; racecheck over the new D=64 modified kernels on a small problem;
# B's whole GPU suite beside them. Outputs packed in one archive.
set -u
cd "$(dirname "$0")"
T0=$SECONDS
export FLASH_ATTN_REQUIRE_GPU=1 CUDA_CACHE_PATH=$PWD/cuda-cache
R=$PWD/out5; mkdir -p $R
tar xJf call4-bins.tar.xz B
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/summary.txt
cd B
timeout 60 ./gpu-tests modifiers::every_modified_kernel_on_a_small_problem > $R/warm.txt 2>&1
echo "warm exit $? (t=$((SECONDS - T0)))" >> $R/summary.txt
for i in 0 1 2 3 4 5 6; do
  left=$((560 - (SECONDS - T0)))
  ( FLASH_ATTN_KERNEL_SHARD=$i/7 timeout $left compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu-tests --test-threads=1 --exact modifiers::every_sm90_modified_kernel_with_each_modifier > $R/san-racecheck-sm90-shard$i.log 2>&1; echo "san racecheck sm90 shard $i/7 exit $? (t=$((SECONDS - T0)))" >> $R/summary.txt ) &
done
left=$((560 - (SECONDS - T0)))
( FLASH_ATTN_KERNEL_FILTER=d64_m128_n128_w12_s2_mod timeout $left compute-sanitizer --tool racecheck --error-exitcode 1 ./gpu-tests --test-threads=1 --exact modifiers::every_modified_kernel_on_a_small_problem > $R/san-racecheck-d64-w12-mod.log 2>&1; echo "san racecheck d64 w12 mod exit $? (t=$((SECONDS - T0)))" >> $R/summary.txt ) &
left=$((560 - (SECONDS - T0)))
timeout $left ./gpu-tests > $R/tests-B.txt 2>&1
echo "== tests-B exit $? (t=$((SECONDS - T0)))" >> $R/summary.txt
wait
cd ..
for f in $R/san-*.log; do echo "$(basename $f): $(grep -h 'test result' $f | cut -c1-60) $(grep -h 'RACECHECK SUMMARY' $f)"; done >> $R/summary.txt
grep "test result" $R/tests-B.txt >> $R/summary.txt
echo "t=$((SECONDS - T0))" >> $R/summary.txt
cat $R/summary.txt
tar cJf $OUT/out5.tar.xz -C $PWD out5
