#!/usr/bin/env bash
# Call 3: A2 (ALiBi in one FFMA per score) against M3 (main 8573463, cold build): timing ABA, then
# A2's whole GPU suite beside the four sanitizer tools over every modified kernel (sm80, sm90, serving with ALiBi)
set -u
cd "$(dirname "$0")"
T0=$SECONDS
export FLASH_ATTN_REQUIRE_GPU=1 CUDA_CACHE_PATH=$PWD/cuda-cache
tar xJf call3-bins.tar.xz
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $OUT/summary.txt
step() { # name timeout cmd...
  local name=$1 to=$2; shift 2
  local left=$((585 - (SECONDS - T0)))
  [ $left -lt 20 ] && { echo "== $name skipped (no time)" | tee -a $OUT/summary.txt; return; }
  [ $to -gt $left ] && to=$left
  local s=$SECONDS
  timeout $to "$@" > $OUT/$name.txt 2>&1
  echo "== $name exit $? ($((SECONDS - s)) s, t=$((SECONDS - T0)))" | tee -a $OUT/summary.txt
}
step mods-A2-1 80 A2/flash-attn-modifier-timing
step mods-M3-1 80 M3/flash-attn-modifier-timing
step mods-A2-2 80 A2/flash-attn-modifier-timing
# JIT warm-up of the modified kernels (PTX only) before the parallel phase
step warm-A2 60 A2/gpu-tests modifiers::every_modified_kernel_on_a_small_problem
cd A2
for tool in memcheck racecheck synccheck initcheck; do
  for pair in mod:modifiers::every_modified_kernel_on_a_small_problem sm90:modifiers::every_sm90_modified_kernel_with_each_modifier alibi:alibi_serving::every_modified_serving_kernel_with_alibi_on_a_small_batch; do
    name=${pair%%:*}; filter=${pair#*:}
    left=$((575 - (SECONDS - T0)))
    ( timeout $left compute-sanitizer --tool $tool --error-exitcode 1 ./gpu-tests --test-threads=1 --exact $filter > $OUT/san-$tool-$name.log 2>&1; echo "san $tool $name exit $?" >> $OUT/summary.txt ) &
  done
done
left=$((575 - (SECONDS - T0)))
timeout $left ./gpu-tests > $OUT/tests-A2.txt 2>&1
echo "== tests-A2 exit $? (t=$((SECONDS - T0)))" | tee -a $OUT/summary.txt
wait
cd ..
for f in $OUT/san-*.log; do echo "$(basename $f): $(grep -h 'test result' $f | cut -c1-60) $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' $f)"; done | tee -a $OUT/summary.txt
echo "t=$((SECONDS - T0))" | tee -a $OUT/summary.txt
