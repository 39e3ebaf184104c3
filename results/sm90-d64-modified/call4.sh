#!/usr/bin/env bash
# Call 4: B (D=64's warp-specialised sm90 modified kernel where the table runs that tile) against A2
# (main f59f9e0's kernels): timing ABAB, B's modifier/ALiBi tests, sanitizers over every sm90 modified
# kernel with each modifier (B holds main's and the new D=64 ones). Outputs packed in one archive.
set -u
cd "$(dirname "$0")"
T0=$SECONDS
export FLASH_ATTN_REQUIRE_GPU=1 CUDA_CACHE_PATH=$PWD/cuda-cache
R=$PWD/out4; mkdir -p $R
tar xJf call4-bins.tar.xz
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/summary.txt
step() { # name timeout cmd...
  local name=$1 to=$2; shift 2
  local left=$((570 - (SECONDS - T0)))
  [ $left -lt 20 ] && { echo "== $name skipped (no time)" | tee -a $R/summary.txt; return; }
  [ $to -gt $left ] && to=$left
  local s=$SECONDS
  timeout $to "$@" > $R/$name.txt 2>&1
  echo "== $name exit $? ($((SECONDS - s)) s, t=$((SECONDS - T0)))" | tee -a $R/summary.txt
}
step mods-B-1 70 B/flash-attn-modifier-timing
step mods-A2-1 70 A2/flash-attn-modifier-timing
step mods-B-2 70 B/flash-attn-modifier-timing
step mods-A2-2 70 A2/flash-attn-modifier-timing
cd B
for tool in memcheck synccheck initcheck racecheck; do
  left=$((560 - (SECONDS - T0)))
  ( timeout $left compute-sanitizer --tool $tool --error-exitcode 1 ./gpu-tests --test-threads=1 --exact modifiers::every_sm90_modified_kernel_with_each_modifier > $R/san-$tool-sm90.log 2>&1; echo "san $tool sm90 exit $? (t=$((SECONDS - T0)))" >> $R/summary.txt ) &
done
cd ..
step tests-B-modifiers 200 B/gpu-tests modifiers
step tests-B-alibi 150 B/gpu-tests alibi
wait
for f in $R/san-*.log; do echo "$(basename $f): $(grep -h 'test result' $f | cut -c1-60) $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' $f)"; done | tee -a $R/summary.txt
echo "t=$((SECONDS - T0))" | tee -a $R/summary.txt
tar cJf $OUT/out4.tar.xz -C $PWD out4
cp $R/summary.txt $OUT/
