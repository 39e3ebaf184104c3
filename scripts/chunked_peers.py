"""Chunked-prefill peers: FlashAttention-2's variable-length forward (as PyTorch carries it) on
the problems that `flash-attn-decode-timing --chunked-json PATH` times our `forward_kv_cache`
and `forward_varlen_kv_cache` on, side by side with ours.

    python3 chunked_peers.py --ours PATH

Each problem of the JSON is a list of (queries, used keys) per sequence, causal aligned to the
bottom right (query i of a chunk of q queries against k keys sees keys 0..=i + k - q), fp16,
32 query heads over the entry's K/V heads (8, or 32 for the multi-head decode step). The peer is torch.ops.aten._flash_attention_forward on packed
[tokens, heads, head_dim] tensors (randn + 0.5, as ours): the queries' offsets and the used
keys' offsets, is_causal=True, which FlashAttention-2 aligns to the bottom right. A cache holds
no more than the used keys here (FA2's varlen call has no cache capacity); the work is the
same. Before it is timed, the peer's output of the first sequence is checked against an fp32
SDPA (math backend) with that mask, and the largest absolute error printed.

Timing as ours (varlen_peers.py's time_us): CUDA events around back-to-back launches, with the
warm-up, repeat and launch counts of the JSON; median and p10-p90 by linear interpolation;
TFLOP/s from the JSON's FLOP
count, which the script re-derives and checks. "peer / ours" is the peer's median over our
default kernel's on the same problem: above 1, ours is faster.
"""
import argparse
import json
import math

# The timing method and the error line, shared with the varlen peers (the bundle carries both).
from varlen_peers import first_line, time_us

TOLERANCE = 1e-2


def chunk_flops(queries, keys, head_dim):
    """The timing tool's chunk_flops: 4 * D per visible score of one head."""
    hidden = min(queries, keys)
    return 4.0 * (queries * keys - hidden * (hidden - 1) / 2) * head_dim


def reference_first(q, k, v, queries, keys):
    """fp32 SDPA (math backend) of the first sequence with the bottom-right causal mask."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    group = q.shape[1] // k.shape[1]
    qs = q[:queries].float().transpose(0, 1)
    ks = k[:keys].float().repeat_interleave(group, dim=1).transpose(0, 1)
    vs = v[:keys].float().repeat_interleave(group, dim=1).transpose(0, 1)
    rows = torch.arange(queries, device=q.device)[:, None]
    cols = torch.arange(keys, device=q.device)[None, :]
    mask = cols <= rows + keys - queries
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask).transpose(0, 1)


def main():
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--ours", required=True)
    args = parser.parse_args()
    with open(args.ours) as f:
        doc = json.load(f)
    heads_q, head_dim = doc["heads_q"], doc["head_dim"]
    counts = (doc["warmup"], doc["repeats"], doc["launches_per_repeat"])
    print(f"chunked-prefill peers on {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"fp16, H_q={heads_q}, D={head_dim}, causal (bottom right)")
    problems = {}
    for entry in doc["results"]:
        chunks = tuple(tuple(chunk) for chunk in entry["chunks"])
        flops = heads_q * sum(chunk_flops(q, k, head_dim) for q, k in chunks)
        if not math.isclose(flops, entry["flops"], rel_tol=1e-12):
            raise SystemExit(f"FLOP count {entry['flops']} for {entry['problem']}, {flops} here")
        problems.setdefault((chunks, entry["heads_kv"]), []).append(entry)
    print("| problem | implementation | median us | p10-p90 us | TFLOP/s | peer / ours | kernel |")
    print("|---|---|---|---|---|---|---|")
    generator = torch.Generator(device="cuda").manual_seed(2026)
    for (chunks, heads_kv), ours in problems.items():
        label = (f"H={heads_q}/{heads_kv} B={len(chunks)} Sq={chunks[0][0]} Sk={chunks[0][1]}"
                 if len(set(chunks)) == 1 else f"H={heads_q}/{heads_kv} ragged, {len(chunks)} "
                 f"sequences")
        flops = ours[0]["flops"]
        default = next(entry for entry in ours if entry["problem"].endswith("default"))
        for entry in ours:
            print(f"| {label} | ours {entry['problem']} splits={entry.get('splits', '-')} | "
                  f"{entry['median_us']:.1f} | {entry['p10_us']:.1f}-{entry['p90_us']:.1f} | "
                  f"{entry['tflops']:.1f} | | {entry['kernel']} |")
        tokens_q = sum(q for q, _ in chunks)
        tokens_k = sum(k for _, k in chunks)

        def draw(tokens, heads):
            return (torch.randn(tokens, heads, head_dim, device="cuda", generator=generator)
                    + 0.5).half()

        q, k, v = draw(tokens_q, heads_q), draw(tokens_k, heads_kv), draw(tokens_k, heads_kv)
        offsets = lambda sizes: torch.tensor(  # noqa: E731
            [0] + [sum(sizes[:i + 1]) for i in range(len(sizes))], dtype=torch.int32,
            device="cuda")
        cu_q = offsets([q_len for q_len, _ in chunks])
        cu_k = offsets([k_len for _, k_len in chunks])
        max_q, max_k = max(q for q, _ in chunks), max(k for _, k in chunks)

        def call():
            return torch.ops.aten._flash_attention_forward(
                q, k, v, cu_q, cu_k, max_q, max_k, 0.0, True, False)[0]

        try:
            out = call()
            torch.cuda.synchronize()
        except Exception as exc:  # whatever this torch build raises for what it does not take
            print(f"| {label} | FA2 varlen | n/a: {first_line(exc)} | | | | |")
            continue
        first_q, first_k = chunks[0]
        error = (out[:first_q].float() - reference_first(q, k, v, first_q, first_k)).abs().max()
        if not torch.isfinite(out).all().item() or error.item() > TOLERANCE:
            print(f"| {label} | FA2 varlen | n/a: max |err| {error.item():.3g} | | | | |")
            continue
        warmup, repeats, launches = counts
        stats = time_us(call, warmup, launches, repeats, flops)
        median = stats["median_us"]
        print(f"| {label} | FA2 varlen (aten._flash_attention_forward), max |err| "
              f"{error.item():.2g} | {median:.1f} | {stats['p10_us']:.1f}-{stats['p90_us']:.1f} | "
              f"{flops / (median * 1e-6) / 1e12:.1f} | {median / default['median_us']:.2f} | |")


if __name__ == "__main__":
    main()
