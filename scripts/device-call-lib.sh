# Sourced by the device call scripts (results/*/call*.sh): one `call_begin` and `call_end`,
# one `step` and one `san` for every call, within the device tool's 600-second limit per
# command. OUT is the device tool's output folder; `call_begin` sets T0 and BINS (the folder of
# the binaries `san` runs). The scripts before log 52, and those that unpack only part of
# their bundle or set a budget of their own, do what `call_begin` does in their own lines.

# step NAME TIMEOUT CMD...: runs CMD into $OUT/NAME.txt, cut at TIMEOUT seconds or at the
# call's budget (CALL_BUDGET, 585 s by default, from T0), and logs its exit status and time in $OUT/summary.txt.
step() {
    local name=$1 to=$2
    shift 2
    local left=$((${CALL_BUDGET:-585} - (SECONDS - T0)))
    if [ $left -lt 20 ]; then
        echo "== $name skipped (no time)" | tee -a "$OUT/summary.txt"
        return
    fi
    [ "$to" -gt $left ] && to=$left
    local start=$SECONDS
    timeout "$to" "$@" > "$OUT/$name.txt" 2>&1
    echo "== $name exit $? ($((SECONDS - start)) s, t=$((SECONDS - T0)))" | tee -a "$OUT/summary.txt"
}

# san TOOL KERNEL_FILTER TEST [TIMEOUT]: compute-sanitizer's TOOL over the one GPU test TEST of
# $BINS/gpu-tests on the kernels whose entry names contain KERNEL_FILTER, cut at TIMEOUT seconds
# or at the call's budget, as `step`.
san() {
    local tool=$1 filter=$2 test=$3 to=${4:-200}
    local left=$((${CALL_BUDGET:-585} - (SECONDS - T0)))
    if [ $left -lt 20 ]; then
        echo "== san $tool $filter $test skipped (no time)" | tee -a "$OUT/summary.txt"
        return
    fi
    [ "$to" -gt $left ] && to=$left
    FLASH_ATTN_KERNEL_FILTER=$filter timeout "$to" compute-sanitizer --tool "$tool" --error-exitcode 1 \
        "$BINS/gpu-tests" --test-threads=1 --exact "$test" > "$OUT/san-$tool-$filter-${test##*::}.log" 2>&1
    echo "== san $tool $filter $test exit $? (t=$((SECONDS - T0)))" | tee -a "$OUT/summary.txt"
}

# call_begin BINS: what every call script does first, after `cd "$(dirname "$0")"` and sourcing
# this file: the clock (T0), the GPU tests' settings (a missing GPU fails them; the JIT cache in
# the call's folder), the binaries unpacked from bins.tar.xz, BINS (the folder `san` runs), and
# the device's name, driver and clock as the summary's first line.
call_begin() {
    T0=$SECONDS
    export FLASH_ATTN_REQUIRE_GPU=1 CUDA_CACHE_PATH=$PWD/cuda-cache
    tar xJf bins.tar.xz
    BINS=$1
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/summary.txt"
}

# call_end: packs everything under $OUT into one file, $OUT/out.tar.xz (the device tool returns
# at most 8 files).
call_end() {
    (cd "$OUT" && tar cJf /tmp/out.tar.xz . && rm -rf "${OUT:?}"/* && mv /tmp/out.tar.xz "$OUT/")
}
