"""Compare a new timing run of our kernels with a committed baseline, shape by shape.

Both files are written by `flash-attn-timing --json` and hold, per case (shape, causal, dtype,
kernel), the per-launch time of each timed repeat (`samples_us`). For every case present in both:

- a two-sided Mann-Whitney rank test of "the two runs have the same distribution" (normal
  approximation with tie correction; 30 repeats a side is plenty for it);
- the ratio of medians, new / baseline, with a 95% bootstrap interval (resampling both runs).

A case is flagged SLOWER only when the test rejects at --alpha AND the whole interval lies above
1 + --tolerance (default 0.02), i.e. the slowdown is both real (beyond the run-to-run noise) and
larger than the tolerance; FASTER symmetrically; anything else is "same". The exit status is 1
when any case is SLOWER, else 0.

Usage: python3 regression_check.py --baseline results/baseline.json --current ours.json
Only the standard library is used.
"""

import argparse
import json
import math
import random
import statistics
import sys


def case_key(row):
    return (row["batch"], row["heads"], row["seq_len"], row["head_dim"], bool(row["causal"]),
            row["dtype"], row["config"])


def load_cases(path):
    with open(path) as file:
        document = json.load(file)
    rows = document.get("all_kernels") or document.get("results") or []
    return {case_key(row): row for row in rows if row.get("samples_us")}


def mann_whitney_p(first, second):
    """Two-sided p-value of the Mann-Whitney U test, normal approximation with tie correction."""
    pooled = sorted((value, group) for group, values in ((0, first), (1, second)) for value in values)
    ranks = [0.0] * len(pooled)
    tie_term = 0.0
    start = 0
    while start < len(pooled):
        end = start
        while end + 1 < len(pooled) and pooled[end + 1][0] == pooled[start][0]:
            end += 1
        average_rank = (start + end) / 2 + 1
        for index in range(start, end + 1):
            ranks[index] = average_rank
        tied = end - start + 1
        tie_term += tied**3 - tied
        start = end + 1
    n1, n2 = len(first), len(second)
    rank_sum_first = sum(rank for rank, (_, group) in zip(ranks, pooled) if group == 0)
    u = rank_sum_first - n1 * (n1 + 1) / 2
    mean = n1 * n2 / 2
    n = n1 + n2
    variance = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)))
    if variance <= 0:
        return 1.0
    z = (abs(u - mean) - 0.5) / math.sqrt(variance)
    return max(0.0, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2))))


def bootstrap_ratio_interval(baseline, current, resamples=2000, seed=12345):
    """95% bootstrap interval of median(current) / median(baseline)."""
    generator = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        base = statistics.median(generator.choices(baseline, k=len(baseline)))
        new = statistics.median(generator.choices(current, k=len(current)))
        ratios.append(new / base)
    ratios.sort()
    return ratios[int(0.025 * resamples)], ratios[int(0.975 * resamples) - 1]


def verdict(p_value, low, high, alpha, tolerance):
    if p_value < alpha and low > 1 + tolerance:
        return "SLOWER"
    if p_value < alpha and high < 1 - tolerance:
        return "FASTER"
    return "same"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--current", required=True)
    parser.add_argument("--alpha", type=float, default=0.01)
    parser.add_argument("--tolerance", type=float, default=0.02)
    args = parser.parse_args()

    baseline, current = load_cases(args.baseline), load_cases(args.current)
    shared = sorted(set(baseline) & set(current))
    if not shared:
        print("regression check: no case with samples in both files; nothing compared")
        return 0
    header = (f"{'B,H,S,D':<14} {'causal':<6} {'dtype':<5} {'kernel':<36} {'base us':>9} "
              f"{'new us':>9} {'new/base':>8} {'95% interval':>15} {'p':>8}  verdict")
    print(header)
    slower = 0
    for key in shared:
        base_samples = baseline[key]["samples_us"]
        new_samples = current[key]["samples_us"]
        p_value = mann_whitney_p(base_samples, new_samples)
        low, high = bootstrap_ratio_interval(base_samples, new_samples)
        base_median, new_median = statistics.median(base_samples), statistics.median(new_samples)
        result = verdict(p_value, low, high, args.alpha, args.tolerance)
        slower += result == "SLOWER"
        batch, heads, seq_len, head_dim, causal, dtype, kernel = key
        print(f"{f'{batch},{heads},{seq_len},{head_dim}':<14} {str(causal):<6} {dtype:<5} {kernel:<36} "
              f"{base_median:>9.2f} {new_median:>9.2f} {new_median / base_median:>8.3f} "
              f"{f'{low:.3f}-{high:.3f}':>15} {p_value:>8.1e}  {result}")
    print(f"regression check: {len(shared)} cases, {slower} slower beyond noise and "
          f"{args.tolerance:.0%} (alpha {args.alpha})")
    return 1 if slower else 0


if __name__ == "__main__":
    sys.exit(main())
