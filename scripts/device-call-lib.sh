# Sourced by the device call scripts (results/*/call*.sh): one `step` and one `san` for every
# call, within the device tool's 600-second limit per command. Set T0=$SECONDS, OUT (the
# device tool's output folder) and BINS (the folder of the binaries `san` runs) first.

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
# $BINS/gpu-tests on the kernels whose entry names contain KERNEL_FILTER.
san() {
    local tool=$1 filter=$2 test=$3 to=${4:-200}
    FLASH_ATTN_KERNEL_FILTER=$filter timeout "$to" compute-sanitizer --tool "$tool" --error-exitcode 1 \
        "$BINS/gpu-tests" --test-threads=1 --exact "$test" > "$OUT/san-$tool-$filter-${test##*::}.log" 2>&1
    echo "== san $tool $filter $test exit $? (t=$((SECONDS - T0)))" | tee -a "$OUT/summary.txt"
}
