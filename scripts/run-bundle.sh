#!/usr/bin/env bash
# Runs the GPU bundle on a machine with an NVIDIA GPU (no Rust needed): GPU tests,
# compute-sanitizer (memcheck, racecheck, synccheck, initcheck), the criterion benchmark, the
# timing of our kernels and the PyTorch peer comparisons. Results go to $OUT (default
# ./results), at most 8 files, with summary.txt last.
#
# Usage: run.sh [load] [tune] [tests] [examples] [sm80] [sanitizer] [sanitizer80] [sm90] [bench] [peers] [decode] [modifiers] [noise]
#        (no argument: all but tune)
#   load:  cold module load time of the default API's kernels (JIT cache disabled), from the
#          embedded cubins and again forced through the PTX JIT, each in a fresh process;
#   tests, sanitizer: run side by side, after one process has filled the JIT cache (with the
#          514 kernels of the space, together more than a 600 s device call: the warm-up took
#          132 s, the sanitizer runs alone 400 s more, the tests alone 330 s; BENCHMARKS.md log
#          40: run them in separate calls);
#   examples: each example once (quickstart, decode_loop, cudarc), its output in the summary;
#   sm80:  the GPU tests again with FLASH_ATTN_PTX_TARGET=sm_80 FLASH_ATTN_FORCE_PTX=1: the
#          sm_80 PTX through the JIT (the cubins are assembled from it, so the target alone
#          would load them);
#   sanitizer80: the four compute-sanitizer tools over every kernel on small problems, on the
#          sm_80 PTX (after one process has JIT-compiled every kernel's sm_80 PTX into the cache);
#   sm90:  the Hopper family's kernels (compute capability 9.0): their GPU tests and the four
#          compute-sanitizer tools over them (the two-stage 128-row dense tiles, or
#          SM90_SANITIZE, every warp-specialised one and every modified one), then the default API and the peers at the
#          anchor and head-dim shapes (and SM80_KERNELS, `B,H,S,D=entry` pairs, timed beside);
#   tune:  the autotuner (not part of "all": its five output files plus the others would pass
#          the 8 files a device call returns); copy $OUT/dispatch-table.tsv over
#          host/dispatch-table.tsv and commit it;
#   peers: our timings, the PyTorch SDPA comparison, and the regression check against the
#          committed baseline (results/baseline.json, carried as baseline.json);
#   decode: KV-cache decode timings (flash-attn-decode-timing), the SDPA peers at the same
#          shapes and the copy bandwidth (decode_peers.py); then the varlen prefill peers
#          (varlen_peers.py: PyTorch's varlen_attn and SDPA over nested jagged tensors on the
#          batch the tool timed, read from its --varlen-json file) beside ours, and the chunked
#          prefill peer (chunked_peers.py: FlashAttention-2's varlen forward on the problems
#          of its --chunked-json file);
#   modifiers: the score modifiers' timings against the plain kernels
#          (flash-attn-modifier-timing: softcap and ALiBi at the anchor shapes, the sliding window
#          at S=8192) and the SDPA peer of the window (peer_compare.py --window);
#   noise: times our kernels a second time and runs the same check against the first pass,
#          which measures the run-to-run noise the check has to see through.
# SANITIZER_TIMEOUT (seconds, default 560) bounds each compute-sanitizer run, so that a slow
# one cannot take the whole device call with it.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$PWD/results}
mkdir -p "$out"
cd "$here"
export FLASH_ATTN_REQUIRE_GPU=1
summary="$out/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

phases=${*:-load tests examples sm80 sanitizer sanitizer80 bench peers decode modifiers noise}
wants() { [[ " $phases " == *" $1 "* ]]; }

# The executables each asked-for phase runs, checked before any GPU work: a device call that
# carried part of the bundle went on without the JIT warm-up (flash-attn-load-time missing),
# every test and sanitizer process JIT-compiled the whole space at once, and the call ran out
# of time with half its results (BENCHMARKS.md log 40).
needed=()
if wants load || wants tests || wants sanitizer || wants tune; then needed+=(flash-attn-load-time); fi
if wants tests || wants sanitizer || wants sm80 || wants sanitizer80 || wants sm90; then needed+=(gpu-tests); fi
if wants sm90; then needed+=(flash-attn-timing); fi
if wants tune; then needed+=(flash-attn-tune); fi
if wants bench; then needed+=(forward-bench serving-bench); fi
if wants peers || wants noise; then needed+=(flash-attn-timing flash-attn-regression); fi
if wants decode; then needed+=(flash-attn-decode-timing); fi
if wants modifiers; then needed+=(flash-attn-modifier-timing); fi
for executable in "${needed[@]}"; do
    if [ ! -x "$here/$executable" ]; then
        echo "run.sh: phases '$phases' need ./$executable, which is not in $here" >&2
        exit 2
    fi
done

note "bundle $(cat COMMIT) on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), $(date -u +%Y-%m-%dT%H:%MZ)"

# Every exposed kernel but the default API's is JIT-compiled from its PTX on first load. The
# driver caches the result on disk: a big cache here, so that later processes (the sanitizer
# runs) reuse what the first compiled.
export CUDA_CACHE_PATH="$here/.jit-cache" CUDA_CACHE_MAXSIZE=4294967296

# 0. Cold load of the default API's kernels: the driver's on-disk JIT cache is disabled, so
#    every module is compiled; from the embedded cubins, then forced through the PTX JIT.
if wants load; then
    CUDA_CACHE_DISABLE=1 ./flash-attn-load-time > "$out/load-time.log" 2>&1
    load_status=$?
    CUDA_CACHE_DISABLE=1 ./flash-attn-load-time --ptx >> "$out/load-time.log" 2>&1
    note "load time, cubins then forced PTX JIT (exit $load_status, $?):"
    note "$(cat "$out/load-time.log")"
fi

# Loads every exposed kernel once, filling the JIT cache before processes run in parallel.
if wants tests || wants sanitizer || wants tune; then
    start=$SECONDS
    ./flash-attn-load-time --all > warm.log 2>&1
    note "JIT cache warmed with every exposed kernel (exit $?, $((SECONDS - start)) s): $(tail -n 1 warm.log)"
fi

# The autotuner: screens every kernel on the tuning sweep (validated first), times the best of
# each group in full, confirms each group's winner against its runner-up, and writes the
# ranked table, JSON, SVG plot and dispatch table.
if wants tune; then
    ./flash-attn-tune --out "$out" > "$out/tune.log" 2>&1
    note "tuner (exit $?):"
    note "$(sed -n '/=== Dispatch table ===/,$p' "$out/tune.log")"
fi

# 2. compute-sanitizer, started first and run alongside the tests (each run is mostly CPU
#    work): all four tools over every kernel on small problems (causal and not), each tool's
#    kernels split over processes (FLASH_ATTN_KERNEL_SHARD); memcheck over every kernel at the
#    seed shape; memcheck and initcheck over the tail and causal sweep; racecheck and
#    synccheck on rows that see no key (the path that skips the main loop). Each must end in
#    0 errors.
sanitizer_jobs=()
sanitize() {
    local name=$1 tool=$2 filter=$3 shard=${4:-}
    (
        if [ -n "$shard" ]; then export FLASH_ATTN_KERNEL_SHARD=$shard; fi
        start=$SECONDS
        timeout "${SANITIZER_TIMEOUT:-560}" compute-sanitizer --tool "$tool" --error-exitcode 1 ./gpu-tests --test-threads=1 --exact "$filter" > "sanitizer-$name.log" 2>&1
        echo "exit $? after $((SECONDS - start)) s" >> "sanitizer-$name.log"
    ) &
    sanitizer_jobs+=("$name|$tool|$filter|$shard")
}
if wants sanitizer; then
    for tool in memcheck racecheck synccheck initcheck; do
        shards=3
        [ "$tool" = racecheck ] && shards=4
        for ((i = 0; i < shards; i++)); do
            sanitize "$tool-small-$i" "$tool" forward::every_kernel_on_a_small_problem "$i/$shards"
        done
    done
    for i in 0 1; do
        sanitize "memcheck-seed-$i" memcheck forward::every_kernel_at_the_seed_shape "$i/2"
    done
    for tool in racecheck synccheck; do
        sanitize "$tool-no-key" "$tool" edge_cases::rows_that_see_no_key_are_zero_with_minus_infinite_logsumexp
    done
    for tool in memcheck initcheck; do
        sanitize "$tool-sweep-fp16" "$tool" sweep::tails_and_causal_fp16
        sanitize "$tool-sweep-bf16" "$tool" sweep::tails_and_causal_bf16
    done
    # The launches at the largest batch and query-head counts the host accepts, under every
    # tool; memcheck and initcheck on 64-bit offsets past 2^32 elements; memcheck on the stream
    # ordering and concurrency tests.
    for tool in memcheck racecheck synccheck initcheck; do
        sanitize "$tool-largest-batch" "$tool" safety::the_largest_batch_the_host_accepts_is_correct
        sanitize "$tool-most-heads" "$tool" safety::the_most_query_heads_the_host_accepts_are_correct
    done
    for tool in memcheck initcheck; do
        sanitize "$tool-far-offsets" "$tool" safety::offsets_past_two_to_the_32_elements_reach_the_right_rows
    done
    # The serving kernels (KV cache, split-KV with its last-block combine), split and not, over
    # two processes (racecheck over all of them in one ran past 400 s beside the other runs:
    # log 40).
    for tool in memcheck racecheck synccheck initcheck; do
        for i in 0 1; do
            sanitize "$tool-serving-$i" "$tool" kv_cache::every_serving_kernel_on_a_small_cache "$i/2"
        done
        # Every paged kernel, with a page index past the cache in one sequence of each run.
        sanitize "$tool-paged" "$tool" paged::every_paged_kernel_on_a_small_cache
        # Every serving kernel on a ragged variable-length batch.
        sanitize "$tool-varlen" "$tool" varlen::every_serving_kernel_on_a_small_ragged_batch
        # Every serving and paged kernel on a ragged batch of queries against a cache.
        sanitize "$tool-varlen-cache" "$tool" varlen_cache::every_cache_kernel_on_a_small_batch
        # Every modified kernel (window, softcap, ALiBi; each alone and all three).
        sanitize "$tool-modified" "$tool" modifiers::every_modified_kernel_on_a_small_problem
        # Every modified serving and paged kernel with ALiBi (and a window and a softcap), on
        # each serving call, split and not: two to five calls per kernel, so the kernels are
        # split over two processes.
        for i in 0 1; do
            sanitize "$tool-alibi-serving-$i" "$tool" alibi_serving::every_modified_serving_kernel_with_alibi_on_a_small_batch "$i/2"
        done
    done
    sanitize memcheck-ordering memcheck safety::uploads_kernels_and_downloads_are_ordered
    sanitize memcheck-concurrency memcheck safety::concurrent_calls_give_the_bits_of_serial_calls
fi

# 1. GPU tests against the f64 CPU reference.
if wants tests; then
    start=$SECONDS
    ./gpu-tests --test-threads=4 2>&1 | tee "$out/gpu-tests.log" | grep -E "^test |test result"
    note "gpu tests ($((SECONDS - start)) s): $(grep 'test result' "$out/gpu-tests.log" | tail -n 1)"
fi

if wants sanitizer; then
    wait
    sanitizer_log="$out/sanitizer.log"
    : > "$sanitizer_log"
    for job in "${sanitizer_jobs[@]}"; do
        IFS='|' read -r name tool filter shard <<< "$job"
        {
            echo "=== compute-sanitizer --tool $tool $filter${shard:+ (kernel shard $shard)}"
            cat "sanitizer-$name.log"
        } >> "$sanitizer_log"
        summary_line=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "sanitizer-$name.log" | tail -n 1)
        note "sanitizer $tool $filter${shard:+ [$shard]}: $(tail -n 1 "sanitizer-$name.log"), $summary_line"
    done
fi

# 1a. Each example once (FLASH_ATTN_REQUIRE_GPU is set: a missing GPU fails it); their output
#     goes to the summary, for the README.
if wants examples; then
    for example in example-*; do
        output=$(./"$example" 2>&1)
        note "$example (exit $?):"
        note "$output"
    done
fi

# 1b. The GPU tests again on the sm_80 PTX (what an A100 or an RTX 30x0 loads), JIT-compiled
#     on this device: every test's instance forces that PTX target (FLASH_ATTN_PTX_TARGET).
if wants sm80; then
    start=$SECONDS
    # Not a file of its own in $OUT (at most 8 come back): the result and any failure go to
    # the summary.
    FLASH_ATTN_PTX_TARGET=sm_80 FLASH_ATTN_FORCE_PTX=1 ./gpu-tests --test-threads=4 > gpu-tests-sm80.log 2>&1
    note "gpu tests on the sm_80 PTX (exit $?, $((SECONDS - start)) s): $(grep 'test result' gpu-tests-sm80.log | tail -n 1)"
    grep -E "^test .*FAILED|panicked" gpu-tests-sm80.log | head -n 20 | tee -a "$summary"
fi

# 1c. compute-sanitizer on the sm_80 PTX: all four tools over every kernel on small problems
#     (causal and not), each tool's kernels split over processes. Each must end in 0 errors.
if wants sanitizer80; then
    start=$SECONDS
    FLASH_ATTN_PTX_TARGET=sm_80 FLASH_ATTN_FORCE_PTX=1 ./gpu-tests --test-threads=1 --exact \
        forward::every_kernel_on_a_small_problem > warm-sm80.log 2>&1
    note "sm_80 PTX JIT-compiled for every kernel (exit $?, $((SECONDS - start)) s)"
    for tool in memcheck racecheck synccheck initcheck; do
        shards=3
        [ "$tool" = racecheck ] && shards=4
        for ((i = 0; i < shards; i++)); do
            FLASH_ATTN_PTX_TARGET=sm_80 FLASH_ATTN_FORCE_PTX=1 FLASH_ATTN_KERNEL_SHARD="$i/$shards" \
                timeout "${SANITIZER_TIMEOUT:-560}" compute-sanitizer --tool "$tool" --error-exitcode 1 \
                ./gpu-tests --test-threads=1 --exact forward::every_kernel_on_a_small_problem \
                > "sanitizer80-$tool-$i.log" 2>&1 &
        done
    done
    wait
    for log in sanitizer80-*.log; do
        note "sanitizer on the sm_80 PTX, ${log#sanitizer80-}: $(grep 'test result' "$log" | tail -n 1 | cut -c1-40), $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1)"
    done
fi

# 1d. The Hopper family (the `_sm90a` entries, for compute capability 9.0 only). First every
#     sm90 kernel once on small problems (which also fills the JIT cache), then, on an
#     otherwise idle GPU, the default API (which dispatches to them on this device where
#     host/dispatch-table-sm90a.tsv says) against the peers at the anchor and head-dim shapes,
#     and each shape's sm80 kernel beside it (SM80_KERNELS: `B,H,S,D=entry` pairs); then the
#     four compute-sanitizer tools over the kernels SM90_SANITIZE names (an entry-name filter,
#     default `_w8_s2_sm90a`) and the warp-specialised ones (`_w12_`), beside the odd-shape
#     test of those kernels and the default
#     API's tests at every head dim and on the tail and causal sweep.
if wants sm90; then
    start=$SECONDS
    FLASH_ATTN_KERNEL_FILTER=_sm90a ./gpu-tests --test-threads=1 --exact \
        forward::every_kernel_on_a_small_problem > "$out/gpu-tests-sm90.log" 2>&1
    note "every sm90 kernel on a small problem (exit $?, $((SECONDS - start)) s): $(grep 'test result' "$out/gpu-tests-sm90.log" | tail -n 1)"
    start=$SECONDS
    shapes=(anchors 8,16,2048,32 8,16,2048,96 4,16,2048,160 4,16,2048,192 4,16,2048,224 4,16,2048,256)
    for shape in "${shapes[@]}"; do
        if [ "$shape" = anchors ]; then shape_args=(); else shape_args=(--shape "$shape"); fi
        ./flash-attn-timing --json "timing-sm90-$shape.json" "${shape_args[@]}" >> "$out/timing-sm90.log" 2>&1
    done
    for pair in ${SM80_KERNELS:-}; do
        ./flash-attn-timing --kernel "${pair#*=}" --shape "${pair%%=*}" >> "$out/timing-sm90.log" 2>&1
    done
    # One peer process over every shape's cases (each python start costs seconds).
    python3 -c 'import json, sys
files = [json.load(open(path)) for path in sys.argv[2:]]
merged = {"device": files[0]["device"], "results": [], "all_kernels": []}
for f in files:
    merged["results"] += f["results"]
    merged["all_kernels"] += f["all_kernels"]
json.dump(merged, open(sys.argv[1], "w"))' timing-sm90.json timing-sm90-*.json
    python3 peer_compare.py --ours timing-sm90.json --out peers-sm90.json >> "$out/timing-sm90.log" 2>&1
    note "sm90 timing and peers ($((SECONDS - start)) s):"
    note "$(grep -E '^[0-9]+,[0-9]+,[0-9]+,[0-9]+ ' "$out/timing-sm90.log")"
    start=$SECONDS
    # The single-modifier kernels (the dense loop with one modifier alone), each `name:test`:
    # entries `_<name>_sm90a`, their test `modifiers::<test>`.
    one_modifier_tests="alibi:every_alibi_kernel_with_alibi_alone softcap:every_softcap_kernel_with_the_softcap_alone"
    for tool in memcheck racecheck synccheck initcheck; do
        FLASH_ATTN_KERNEL_FILTER=${SM90_SANITIZE:-_w8_s2_sm90a} \
            timeout "${SANITIZER_TIMEOUT:-560}" compute-sanitizer --tool "$tool" --error-exitcode 1 \
            ./gpu-tests --test-threads=1 --exact forward::every_kernel_on_a_small_problem \
            > "$out/sanitizer90-$tool.log" 2>&1 &
        # The modified ones (window, softcap, ALiBi), each with every modifier and each alone.
        FLASH_ATTN_KERNEL_FILTER=_mod_sm90a \
            timeout "${SANITIZER_TIMEOUT:-560}" compute-sanitizer --tool "$tool" --error-exitcode 1 \
            ./gpu-tests --test-threads=1 --exact modifiers::every_modified_kernel_on_a_small_problem \
            > "sanitizer90mod-$tool.log" 2>&1 &
        for alone in $one_modifier_tests; do
            FLASH_ATTN_KERNEL_FILTER="_${alone%%:*}_sm90a" \
                timeout "${SANITIZER_TIMEOUT:-560}" compute-sanitizer --tool "$tool" --error-exitcode 1 \
                ./gpu-tests --test-threads=1 --exact "modifiers::${alone#*:}" \
                > "sanitizer90${alone%%:*}-$tool.log" 2>&1 &
        done
        # The warp-specialised ones (a producer warpgroup: `_w12_`), D=128's shipping tile.
        FLASH_ATTN_KERNEL_FILTER=_w12_ \
            timeout "${SANITIZER_TIMEOUT:-560}" compute-sanitizer --tool "$tool" --error-exitcode 1 \
            ./gpu-tests --test-threads=1 --exact forward::every_kernel_on_a_small_problem \
            > "sanitizer90ws-$tool.log" 2>&1 &
    done
    FLASH_ATTN_KERNEL_FILTER=${SM90_SANITIZE:-_w8_s2_sm90a} ./gpu-tests --test-threads=2 --exact \
        sm90::every_sm90_kernel_on_odd_shapes >> "$out/gpu-tests-sm90.log" 2>&1
    note "the odd-shape test of the sm90 kernels (exit $?): $(grep 'test result' "$out/gpu-tests-sm90.log" | tail -n 1)"
    FLASH_ATTN_KERNEL_FILTER=_w12_ ./gpu-tests --test-threads=2 --exact \
        sm90::every_sm90_kernel_on_odd_shapes >> "$out/gpu-tests-sm90.log" 2>&1
    note "the odd-shape test of the warp-specialised sm90 kernels (exit $?): $(grep 'test result' "$out/gpu-tests-sm90.log" | tail -n 1)"
    FLASH_ATTN_KERNEL_FILTER=_mod_sm90a ./gpu-tests --test-threads=2 --exact \
        modifiers::every_sm90_modified_kernel_with_each_modifier >> "$out/gpu-tests-sm90.log" 2>&1
    note "every sm90 modified kernel with each modifier (exit $?): $(grep 'test result' "$out/gpu-tests-sm90.log" | tail -n 1)"
    for alone in $one_modifier_tests; do
        ./gpu-tests --test-threads=2 --exact "modifiers::${alone#*:}" >> "$out/gpu-tests-sm90.log" 2>&1
        note "${alone#*:} (exit $?): $(grep 'test result' "$out/gpu-tests-sm90.log" | tail -n 1)"
    done
    ./gpu-tests --test-threads=2 sweep:: >> "$out/gpu-tests-sm90.log" 2>&1
    note "the sweep through the default API (exit $?): $(grep 'test result' "$out/gpu-tests-sm90.log" | tail -n 1)"
    ./gpu-tests --test-threads=2 --exact forward::every_head_dim_through_the_default_api >> "$out/gpu-tests-sm90.log" 2>&1
    note "every head dim through the default API (exit $?): $(grep 'test result' "$out/gpu-tests-sm90.log" | tail -n 1)"
    wait
    # The modified, single-modifier and warp-specialised kernels' sixteen logs come back as one
    # (the call returns at most 8 files).
    tail -n 40 sanitizer90mod-*.log sanitizer90alibi-*.log sanitizer90softcap-*.log sanitizer90ws-*.log \
        > "$out/sanitizer90mod.log"
    for log in "$out"/sanitizer90-*.log sanitizer90mod-*.log sanitizer90alibi-*.log \
        sanitizer90softcap-*.log sanitizer90ws-*.log; do
        note "sanitizer on the sm90 kernels, ${log##*/sanitizer90} ($((SECONDS - start)) s): $(grep 'test result' "$log" | tail -n 1 | cut -c1-40), $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1)"
    done
fi

# 3. The criterion benchmark.
if wants bench; then
    ./forward-bench --bench 2>&1 | tee "$out/bench.log" | grep -E "forward_|time:|thrpt:"
    ./serving-bench --bench 2>&1 | tee "$out/serving-bench.log" | grep -E "decode_|varlen_|time:|thrpt:"
fi

# 4. Our timings (the kernel the default API dispatches to), then the peer comparison on the
#    same shapes.
if wants peers; then
    ./flash-attn-timing --json "$out/ours.json" 2>&1 | tee "$out/timing.log"
    python3 peer_compare.py --ours "$out/ours.json" --out "$out/peers.json" > "$out/peers.log" 2>&1
    cat "$out/peers.log" >> "$out/timing.log"
    rm "$out/peers.log"
    note "$(sed -n '/^B,H,S,D .*causal/,$p' "$out/timing.log")"
    if [ -f baseline.json ]; then
        ./flash-attn-regression --baseline baseline.json --current "$out/ours.json" > regression.txt 2>&1
        note "regression check against the committed baseline (exit $?):"
        cat regression.txt >> "$out/timing.log"
        note "$(tail -n 1 regression.txt)"
    fi
fi

# 4b. Decode against a KV cache: ours, then the SDPA peers and the copy bandwidth, in the same
#     call; then the varlen and chunked prefill peers on the problems the tool wrote (the JSON
#     files stay here: at most 8 files come back from $OUT).
if wants decode; then
    rm -f varlen-ours.json chunked-ours.json
    {
        ./flash-attn-decode-timing --varlen-json varlen-ours.json --chunked-json chunked-ours.json
        python3 decode_peers.py
        python3 varlen_peers.py --ours varlen-ours.json
        python3 chunked_peers.py --ours chunked-ours.json
    } > "$out/decode.log" 2>&1
    note "$(cat "$out/decode.log")"
fi

# 4c. The score modifiers: softcap and ALiBi against the plain kernels at the anchor shapes, the
#     sliding window against the causal time scaled by its visible fraction; then SDPA with the
#     window as an explicit mask.
if wants modifiers; then
    { ./flash-attn-modifier-timing; python3 peer_compare.py --window; } > "$out/modifiers.log" 2>&1
    note "$(cat "$out/modifiers.log")"
fi

# 5. Run-to-run noise: a second pass of our timings, checked against the first.
if wants noise && [ -f "$out/ours.json" ]; then
    ./flash-attn-timing --json repeat.json > /dev/null 2>&1
    ./flash-attn-regression --baseline "$out/ours.json" --current repeat.json > noise.txt 2>&1
    note "noise check, second timing pass against the first (exit $?):"
    cat noise.txt >> "$out/timing.log"
    note "$(tail -n 1 noise.txt)"
fi
