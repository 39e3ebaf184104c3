#!/usr/bin/env python3
"""Time PyTorch's FlexAttention with the score modifiers our modified kernels apply, against
its own plain run: what a peer pays for a softcap, ALiBi and a sliding window.

Usage:
    python3 scripts/modifier_peers.py [--repeats 30] [--graph-calls 20] [--shapes B,H,S,D ...]

SDPA has no softcap, ALiBi or window argument (`peer_compare.py --window` gives it the window
as an explicit mask); FlexAttention (`torch.nn.attention.flex_attention`, compiled to Triton
kernels by `torch.compile`) takes each as a `score_mod` or a block mask, and skips the blocks
a block mask leaves out, as our kernels do. Its plain speed is not FlashAttention's; the
figure of interest is each modifier's time over its plain time, beside ours
(`flash-attn-modifier-timing`, run in the same device call).

Cases, fp16, inputs randn + 0.5 as in `peer_compare.py`, per shape (default: 4,8,512,128,
8,16,2048,64 and 2,16,4096,128), causal and not:
  * plain: no score_mod (the causal mask as a block mask);
  * softcap 30: `30 * tanh(score / 30)` on the scaled score (as ours and Gemma 2);
  * alibi: `score - slope[h] * |q_idx - kv_idx|` with BLOOM's slopes (in the scaled score's
    units, which changes the values, not the work);
then at 2,16,8192,128 causal: the causal plain run against a window of 1,024 keys (the
diagonal and 1,023 before it, a block mask), scaled by the visible fraction of the causal
score matrix.

Timing as `peer_compare.py` (its graph timing and `summarize`): a CUDA graph of `graph_calls`
back-to-back calls, events around each of `repeats` replays; median and p10-p90 per call in
microseconds, and TFLOP/s at the median.
"""

import argparse

from peer_compare import attention_flops, capture_graph, summarize, time_graph

DEFAULT_SHAPES = ((4, 8, 512, 128), (8, 16, 2048, 64), (2, 16, 4096, 128))
WINDOW_SHAPE = (2, 16, 8192, 128)
WINDOW = 1024
SOFTCAP = 30.0


def visible_fraction(seq_len, window):
    """The fraction of the causal score matrix a window of `window` keys (the diagonal and
    `window - 1` before it, as ours) leaves: row i sees min(i + 1, window) keys."""
    causal = seq_len * (seq_len + 1) / 2
    seen = sum(min(i + 1, window) for i in range(seq_len))
    return seen / causal


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--graph-calls", type=int, default=20)
    parser.add_argument("--shapes", nargs="*", default=None,
                        help="B,H,S,D shapes instead of the defaults")
    args = parser.parse_args()

    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    # One compiled kernel per shape and modifier: more than dynamo's default of 8 recompiles.
    torch._dynamo.config.recompile_limit = 256
    flex = torch.compile(flex_attention, dynamic=False)
    print(f"FlexAttention on {torch.cuda.get_device_name()}, torch {torch.__version__}")

    def run(q, k, v, score_mod, block_mask, flops):
        def call():
            return flex(q, k, v, score_mod=score_mod, block_mask=block_mask)
        out = call()
        if not torch.isfinite(out).all():
            raise RuntimeError("non-finite output")
        graph = capture_graph(call, args.graph_calls)
        return summarize(time_graph(graph, args.graph_calls, args.repeats), flops)

    def report(label, result, plain, scale=1.0):
        ratio = "" if plain is None else \
            f", x{result['median_us'] / (plain['median_us'] * scale):.3f} vs plain" + \
            (f" x visible {scale:.4f}" if scale != 1.0 else "")
        print(f"{label}: {result['median_us']:.2f} us (p10-p90 {result['p10_us']:.2f}-"
              f"{result['p90_us']:.2f}), {result['tflops']:.1f} TFLOP/s{ratio}", flush=True)

    shapes = DEFAULT_SHAPES if args.shapes is None else \
        [tuple(int(x) for x in s.split(",")) for s in args.shapes]
    for batch, heads, seq_len, head_dim in shapes:
        q, k, v = (torch.randn(batch, heads, seq_len, head_dim, device="cuda",
                               dtype=torch.float16) + 0.5 for _ in range(3))
        slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)],
                              device="cuda", dtype=torch.float32)

        def softcap(score, b, h, q_idx, kv_idx):
            return SOFTCAP * torch.tanh(score / SOFTCAP)

        def alibi(score, b, h, q_idx, kv_idx):
            return score - slopes[h] * (q_idx - kv_idx).abs()

        for causal in (False, True):
            block_mask = None
            if causal:
                block_mask = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx,
                                               None, None, seq_len, seq_len)
            name = f"F16 {batch},{heads},{seq_len},{head_dim} causal={str(causal).lower()}"
            flops = attention_flops(batch, heads, seq_len, head_dim, causal)
            plain = run(q, k, v, None, block_mask, flops)
            report(f"{name} plain", plain, None)
            for label, score_mod in (("softcap", softcap), ("alibi", alibi)):
                report(f"{name} {label}", run(q, k, v, score_mod, block_mask, flops), plain)
        del q, k, v
        torch.cuda.empty_cache()

    batch, heads, seq_len, head_dim = WINDOW_SHAPE
    q, k, v = (torch.randn(batch, heads, seq_len, head_dim, device="cuda",
                           dtype=torch.float16) + 0.5 for _ in range(3))
    causal_mask = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx,
                                    None, None, seq_len, seq_len)
    window_mask = create_block_mask(
        lambda b, h, q_idx, kv_idx: (q_idx >= kv_idx) & (q_idx - kv_idx < WINDOW),
        None, None, seq_len, seq_len)
    name = f"F16 {batch},{heads},{seq_len},{head_dim}"
    causal_flops = attention_flops(batch, heads, seq_len, head_dim, True)
    visible = visible_fraction(seq_len, WINDOW)
    causal = run(q, k, v, None, causal_mask, causal_flops)
    report(f"{name} causal", causal, None)
    # The window's FLOPs: the visible pairs' (its TFLOP/s counts real work only).
    window = run(q, k, v, None, window_mask, causal_flops * visible)
    report(f"{name} window {WINDOW}", window, causal, visible)


if __name__ == "__main__":
    main()
