#!/usr/bin/env bash
# Call 2 (BENCHMARKS.md log 71): `cargo bench` (both criterion benchmarks) on the tree of
# commit d5e8be1 (main's kernels, byte for byte, with the one nvptx build), an H200.
set -u
cd "$(dirname "$0")"
source ../scripts/device-call-lib.sh
call_begin NEW
step forward-bench 330 NEW/forward-bench --bench
step serving-bench 240 NEW/serving-bench --bench
call_end
