#!/usr/bin/env bash
# `cargo bench` on the GPU after logs 82-84 (BENCHMARKS.md log 84): criterion's forward and
# serving benchmarks of bundle e09f375 (main's kernels after the dense-own-end-all merge). Put
# it in an excluded folder beside bins.tar.xz holding B/ (forward-bench, serving-bench); carry
# that folder.
set -u
cd "$(dirname "$0")"
source ../../scripts/device-call-lib.sh
export CALL_BUDGET=585
call_begin B
step criterion-forward 240 B/forward-bench --bench
step criterion-serving 300 B/serving-bench --bench
call_end
