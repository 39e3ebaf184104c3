#!/usr/bin/env bash
# Builds the GPU bundle, with every kernel of the search space (FLASH_ATTN_KERNELS=all): the GPU
# test and benchmark executables, the examples (example-*), the timing, load-time, tuning and
# regression tools, the peer-comparison scripts (peer_compare.py, decode_peers.py,
# varlen_peers.py) and the runner, in the git-ignored folder bundle/. The GPU machine has
# no Rust; carry bundle/ there and run `bash bundle/run.sh` (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=bundle
rm -rf "$bundle"
mkdir -p "$bundle"

# Prints the executable path of the artifact named $1 from cargo's JSON messages on stdin.
executable_of() {
    python3 -c '
import json, sys
name = sys.argv[1]
for line in sys.stdin:
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and message.get("executable") and message["target"]["name"] == name:
        print(message["executable"])
' "$1"
}

# ptxas is needed for the cubins the bundle should load (without it every kernel is JIT-compiled
# from PTX): take $PTXAS, or ptxas on PATH.
if [ -z "${PTXAS:-}" ] && ! command -v ptxas > /dev/null; then
    echo "build-bundle: no ptxas (set PTXAS or PATH); the bundle would carry no cubins" >&2
    exit 1
fi

# The whole search space, not only the shipping set a default build compiles: the tuner needs
# every configuration, and the GPU tests and the sanitizer runs then cover every exposed kernel.
export FLASH_ATTN_KERNELS=all

# The cudarc backend's GPU tests and example are built in (feature cudarc).
gpu_tests=$(cargo test --release --features cudarc --test gpu --no-run --message-format=json | executable_of gpu)
examples=(quickstart decode_loop cudarc)
example_paths=()
for example in "${examples[@]}"; do
    example_paths+=("$(cargo build --release --features cudarc --example "$example" --message-format=json | executable_of "$example")")
done
bench=$(cargo bench --bench forward --no-run --message-format=json | executable_of forward)
serving_bench=$(cargo bench --bench serving --no-run --message-format=json | executable_of serving)
timing=$(cargo build --release -p flash-attn-tools --bin flash-attn-timing --message-format=json | executable_of flash-attn-timing)
load_time=$(cargo build --release -p flash-attn-tools --bin flash-attn-load-time --message-format=json | executable_of flash-attn-load-time)
tune=$(cargo build --release -p flash-attn-tools --bin flash-attn-tune --message-format=json | executable_of flash-attn-tune)
regression=$(cargo build --release -p flash-attn-tools --bin flash-attn-regression --message-format=json | executable_of flash-attn-regression)
decode_timing=$(cargo build --release -p flash-attn-tools --bin flash-attn-decode-timing --message-format=json | executable_of flash-attn-decode-timing)
modifier_timing=$(cargo build --release -p flash-attn-tools --bin flash-attn-modifier-timing --message-format=json | executable_of flash-attn-modifier-timing)

cp "$gpu_tests" "$bundle/gpu-tests"
cp "$bench" "$bundle/forward-bench"
cp "$serving_bench" "$bundle/serving-bench"
cp "$timing" "$bundle/flash-attn-timing"
cp "$load_time" "$bundle/flash-attn-load-time"
cp "$tune" "$bundle/flash-attn-tune"
cp "$regression" "$bundle/flash-attn-regression"
cp "$decode_timing" "$bundle/flash-attn-decode-timing"
cp "$modifier_timing" "$bundle/flash-attn-modifier-timing"
cp scripts/decode_peers.py scripts/varlen_peers.py scripts/chunked_peers.py "$bundle/"
for i in "${!examples[@]}"; do
    cp "${example_paths[$i]}" "$bundle/example-${examples[$i]}"
    strip "$bundle/example-${examples[$i]}"
done
strip "$bundle/gpu-tests" "$bundle/forward-bench" "$bundle/serving-bench" "$bundle/flash-attn-timing" \
    "$bundle/flash-attn-load-time" "$bundle/flash-attn-tune" "$bundle/flash-attn-regression" \
    "$bundle/flash-attn-modifier-timing"
cp scripts/run-bundle.sh "$bundle/run.sh"
cp scripts/peer_compare.py "$bundle/"
if [ -f results/baseline.json ]; then cp results/baseline.json "$bundle/baseline.json"; fi
git rev-parse --short HEAD > "$bundle/COMMIT" 2>/dev/null || echo unknown > "$bundle/COMMIT"
du -sh "$bundle"
