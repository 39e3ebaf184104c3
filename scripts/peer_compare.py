#!/usr/bin/env python3
"""Time PyTorch SDPA backends on the shapes our Rust FlashAttention kernel was timed on.

Usage:
    python3 scripts/peer_compare.py --ours ours.json --out peers.json \
        [--repeats 30] [--graph-calls 20]
    python3 scripts/peer_compare.py --window [--repeats 30] [--graph-calls 20]

--window times the peers of our sliding window instead (flash-attn-modifier-timing times
ours): at B=2, H=16, S=8192, D=128, causal, and with a window of 1024 keys up to the diagonal
as an explicit boolean mask (SDPA has no window argument; the backends that take a mask,
cudnn and efficient, compute every block), fp16 and bf16. SDPA has no softcap or ALiBi
argument either: those are compared against our own plain kernels only.

Input (--ours) is the JSON written by our Rust timing tool:
    {"device": ..., "date": ..., "results": [{"batch", "heads", "seq_len", "head_dim",
     "causal", "dtype" ("f16" | "bf16"), "median_us", "p10_us", "p90_us", ...}, ...]}
Extra keys are ignored for timing and copied verbatim into the output.

Method (the same as the one documented for the project's anchors):
  * q, k, v are fresh [B, H, S, D] CUDA tensors per shape, drawn as randn + 0.5
    (nonzero mean, so softmax rows are not trivially uniform).
  * For each backend (flash, cudnn, efficient), selected with
    torch.nn.attention.sdpa_kernel, one eager call checks that the backend runs
    and that its output is finite; a few more eager calls on a side stream warm up.
  * One CUDA graph is captured holding `graph_calls` back-to-back
    F.scaled_dot_product_attention calls.
  * After a few warm-up replays, `repeats` replays are each timed with a pair of
    torch.cuda.Event(enable_timing=True) around a single graph.replay();
    per-call time = elapsed / graph_calls.
  * Reported: median, min, max, p10, p90 of those per-call times, in microseconds
    (percentiles by linear interpolation, as numpy's default).
  * FLOPs = 4 * B * H * S * S * D, halved when causal;
    TFLOP/s = FLOPs / median seconds / 1e12 (computed the same way for ours and peers).
  * ratio X/ours = X median / ours median, so > 1 means ours is faster.

A backend that raises (unsupported shape/dtype/GPU, no kernel available, ...) or
returns non-finite values is recorded as {"error": "<first line of message>"} and
shown as "n/a"; the script carries on.

torch is imported only inside the functions that need the GPU, so the formatting
and FLOP helpers can be imported and checked on a machine without torch.
"""

import argparse
import datetime
import json
import math
import statistics

BACKENDS = ("flash", "cudnn", "efficient")
SHAPE_KEYS = ("batch", "heads", "seq_len", "head_dim", "causal", "dtype")
DTYPE_NAMES = {"f16": "float16", "fp16": "float16", "float16": "float16",
               "bf16": "bfloat16", "bfloat16": "bfloat16"}
EAGER_WARMUP_CALLS = 3
WARMUP_REPLAYS = 3


# ---------------------------------------------------------------- pure helpers

def attention_flops(batch, heads, seq_len, head_dim, causal):
    """Forward FLOPs: two matmuls of 2*S*S*D each per (batch, head); halved if causal."""
    flops = 4 * batch * heads * seq_len * seq_len * head_dim
    return flops / 2 if causal else flops


def tflops(flops, median_us):
    """TFLOP/s achieved when `flops` take `median_us` microseconds."""
    return flops / (median_us * 1e-6) / 1e12


def percentile(sorted_values, q):
    """q-th percentile (0..100) with linear interpolation (numpy's default method)."""
    pos = (len(sorted_values) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(samples_us, flops):
    """Median/min/max/p10/p90 (us) of per-call samples, plus TFLOP/s at the median."""
    values = sorted(samples_us)
    median = statistics.median(values)
    return {"median_us": median, "min_us": values[0], "max_us": values[-1],
            "p10_us": percentile(values, 10), "p90_us": percentile(values, 90),
            "tflops": tflops(flops, median)}


def ratio_over_ours(peer, ours):
    """Peer median / ours median (> 1 means ours is faster), or None if unavailable."""
    if "median_us" not in peer or not ours.get("median_us"):
        return None
    return peer["median_us"] / ours["median_us"]


def first_line(exc):
    """First non-empty line of an exception's message (or its type name)."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[0].strip() if lines else type(exc).__name__


def row_flops(row):
    return attention_flops(row["batch"], row["heads"], row["seq_len"],
                           row["head_dim"], row["causal"])


# ---------------------------------------------------------------- table

def _us(stats):
    return "n/a" if stats is None or "median_us" not in stats else f"{stats['median_us']:.1f}"


def _ratio(value):
    return "n/a" if value is None else f"{value:.2f}"


def _tf(stats, flops):
    if stats is None or not stats.get("median_us"):
        return "n/a"
    return f"{tflops(flops, stats['median_us']):.1f}"


def _ours_us(ours):
    text = _us(ours)
    if "p10_us" in ours and "p90_us" in ours:
        text += f" ({ours['p10_us']:.1f}-{ours['p90_us']:.1f})"
    return text


TABLE_COLUMNS = ("B,H,S,D", "causal", "dtype", "ours us (p10-p90)", "flash us",
                 "cudnn us", "effic us", "flash/ours", "cudnn/ours",
                 "TF/s ours", "TF/s flash", "TF/s cudnn")


def table_cells(row):
    """Cells of one table line, for one output row (see build_row)."""
    flops = row_flops(row)
    ours, peers = row["ours"], row["peers"]
    return (f"{row['batch']},{row['heads']},{row['seq_len']},{row['head_dim']}",
            "yes" if row["causal"] else "no",
            row["dtype"],
            _ours_us(ours),
            _us(peers.get("flash")), _us(peers.get("cudnn")), _us(peers.get("efficient")),
            _ratio(row["ratio_flash_over_ours"]), _ratio(row["ratio_cudnn_over_ours"]),
            _tf(ours, flops), _tf(peers.get("flash"), flops), _tf(peers.get("cudnn"), flops))


def format_table(rows):
    """Fixed-width table: every column as wide as its widest cell; first column left-aligned."""
    lines = [TABLE_COLUMNS] + [table_cells(row) for row in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(TABLE_COLUMNS))]

    def render(cells):
        first = cells[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(cells[1:], widths[1:]))
        return "  ".join([first, *rest])

    rule = "-" * len(render(TABLE_COLUMNS))
    return "\n".join([render(TABLE_COLUMNS), rule, *(render(cells) for cells in lines[1:])])


def format_header(device, torch_version, date, ours_doc, method):
    lines = [f"device: {device} | torch {torch_version} | date {date}",
             f"ours:   {ours_doc.get('device', '?')} | date {ours_doc.get('date', '?')}",
             f"method: {method}"]
    if ours_doc.get("device") and ours_doc["device"] != device:
        lines.append("WARNING: ours was timed on a different device than the peers")
    return "\n".join(lines)


def build_row(entry, peers):
    """Output row: shape fields, ours copied from the input, peers, and ratios."""
    row = {key: entry[key] for key in SHAPE_KEYS}
    row["ours"] = dict(entry)
    row["peers"] = peers
    row["ratio_flash_over_ours"] = ratio_over_ours(peers.get("flash", {}), entry)
    row["ratio_cudnn_over_ours"] = ratio_over_ours(peers.get("cudnn", {}), entry)
    return row


# ---------------------------------------------------------------- input

def load_ours(path):
    """Read our timing JSON and check that every result has the shape fields we need."""
    with open(path) as f:
        doc = json.load(f)
    for i, entry in enumerate(doc.get("results", [])):
        missing = [key for key in SHAPE_KEYS if key not in entry]
        if missing:
            raise SystemExit(f"{path}: results[{i}] lacks {', '.join(missing)}")
        if entry["dtype"] not in DTYPE_NAMES:
            raise SystemExit(f"{path}: results[{i}] has unknown dtype {entry['dtype']!r}")
        if entry.get("seq_len_kv") is not None:
            # The peers are timed with as many keys as queries; such a case has no peer here.
            raise SystemExit(f"{path}: results[{i}] has {entry['seq_len_kv']} keys for "
                             f"{entry['seq_len']} queries (flash-attn-timing --seq-len-kv); "
                             "the peer comparison times S keys for S queries only")
    return doc


# ---------------------------------------------------------------- GPU timing

def make_qkv(entry):
    """Fresh q, k, v of shape [B, H, S, D] on CUDA: randn + 0.5 (nonzero mean)."""
    import torch

    dtype = getattr(torch, DTYPE_NAMES[entry["dtype"]])
    shape = (entry["batch"], entry["heads"], entry["seq_len"], entry["head_dim"])
    return tuple(torch.randn(shape, device="cuda", dtype=dtype) * 1.0 + 0.5
                 for _ in range(3))


def capture_graph(call, graph_calls):
    """Warm `call` up eagerly on a side stream, then capture `graph_calls` calls of it."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(EAGER_WARMUP_CALLS):
            call()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(graph_calls):
            call()
    torch.cuda.synchronize()
    return graph


def time_graph(graph, graph_calls, repeats):
    """Per-call microseconds of `repeats` timed replays (Events around one replay each)."""
    import torch

    for _ in range(WARMUP_REPLAYS):
        graph.replay()
    torch.cuda.synchronize()

    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(repeats):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0 / graph_calls)  # ms -> us
    return samples


def time_backend(name, q, k, v, causal, graph_calls, repeats, flops, mask=None):
    """Stats dict for one SDPA backend on (q, k, v), or {"error": ...} if it cannot run;
    with `mask` (a boolean attention mask, True where a key is seen) instead of `causal`."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = {"flash": SDPBackend.FLASH_ATTENTION,
               "cudnn": SDPBackend.CUDNN_ATTENTION,
               "efficient": SDPBackend.EFFICIENT_ATTENTION}[name]

    def call():
        if mask is not None:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    try:
        with sdpa_kernel(backend):
            out = call()
            if not torch.isfinite(out).all().item():
                return {"error": "output contains NaN or Inf"}
            del out
            graph = capture_graph(call, graph_calls)
        samples = time_graph(graph, graph_calls, repeats)
        del graph
    except (RuntimeError, NotImplementedError) as exc:
        return {"error": first_line(exc)}
    return summarize(samples, flops)


def time_peers(entry, graph_calls, repeats):
    """Time every backend on one shape, with fresh inputs."""
    q, k, v = make_qkv(entry)
    flops = row_flops(entry)
    return {name: time_backend(name, q, k, v, bool(entry["causal"]),
                               graph_calls, repeats, flops)
            for name in BACKENDS}


# ---------------------------------------------------------------- the sliding window

WINDOW_SHAPE = (2, 16, 8192, 128)
WINDOW_KEYS = 1024


def window_visible_fraction(seq_len, width):
    """Query-key pairs a window of `width` keys up to the diagonal sees, over the causal ones."""
    visible = sum(min(i + 1, width) for i in range(seq_len))
    return visible / (seq_len * (seq_len + 1) / 2)


def time_window(graph_calls, repeats):
    """SDPA at the window shape: causal, and the window as an explicit boolean mask."""
    import torch

    batch, heads, seq_len, head_dim = WINDOW_SHAPE
    fraction = window_visible_fraction(seq_len, WINDOW_KEYS)
    positions = torch.arange(seq_len, device="cuda")
    distance = positions[:, None] - positions[None, :]
    mask = (distance >= 0) & (distance < WINDOW_KEYS)
    print(f"SDPA at B,H,S,D={batch},{heads},{seq_len},{head_dim}: causal, and a window of "
          f"{WINDOW_KEYS} keys as an explicit mask (visible fraction of the causal pairs "
          f"{fraction:.4f})", flush=True)
    for dtype in ("f16", "bf16"):
        entry = {"batch": batch, "heads": heads, "seq_len": seq_len, "head_dim": head_dim,
                 "causal": True, "dtype": dtype}
        q, k, v = make_qkv(entry)
        flops = row_flops(entry)
        for name in BACKENDS:
            causal = time_backend(name, q, k, v, True, graph_calls, repeats, flops)
            window = time_backend(name, q, k, v, False, graph_calls, repeats,
                                  flops * fraction, mask=mask)
            scaled = ("n/a" if "median_us" not in causal
                      else f"{causal['median_us'] * fraction:.1f}")
            print(f"{dtype} {name:<9} causal {_us(causal):>8} us, window (mask) "
                  f"{_us(window):>8} us, causal x fraction {scaled} us"
                  + "".join(f"; {kind}: {stats['error']}"
                            for kind, stats in (("causal", causal), ("window", window))
                            if "error" in stats), flush=True)


# ---------------------------------------------------------------- main

def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Time PyTorch SDPA backends (flash, cudnn, efficient) on the shapes "
                    "in our kernel's timing JSON, by CUDA graph replay, and compare.")
    parser.add_argument("--ours", help="our timing JSON (input)")
    parser.add_argument("--out", help="where to write the comparison JSON")
    parser.add_argument("--window", action="store_true",
                        help="time the sliding window's peers instead (no --ours or --out)")
    parser.add_argument("--repeats", type=int, default=30,
                        help="timed graph replays per backend and shape (default 30)")
    parser.add_argument("--graph-calls", type=int, default=20,
                        help="SDPA calls captured in one CUDA graph (default 20)")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.graph_calls < 1:
        parser.error("--repeats and --graph-calls must be at least 1")
    if not args.window and (args.ours is None or args.out is None):
        parser.error("--ours and --out are required unless --window is given")
    return args


def main(argv=None):
    args = parse_args(argv)
    ours_doc = None if args.window else load_ours(args.ours)

    import torch

    if not torch.cuda.is_available():
        raise SystemExit("CUDA is not available")
    torch.manual_seed(0)
    if args.window:
        time_window(args.graph_calls, args.repeats)
        return

    device = torch.cuda.get_device_name()
    date = datetime.date.today().isoformat()
    method = (f"CUDA graph replay of {args.graph_calls} calls, "
              f"median of {args.repeats} replays")
    print(format_header(device, torch.__version__, date, ours_doc, method), flush=True)

    rows = []
    for entry in ours_doc.get("results", []):
        print(f"timing B,H,S,D={entry['batch']},{entry['heads']},{entry['seq_len']},"
              f"{entry['head_dim']} causal={entry['causal']} {entry['dtype']} ...", flush=True)
        rows.append(build_row(entry, time_peers(entry, args.graph_calls, args.repeats)))
        for name, stats in rows[-1]["peers"].items():
            if "error" in stats:
                print(f"  {name}: unavailable: {stats['error']}", flush=True)

    print(flush=True)
    print(format_table(rows), flush=True)

    with open(args.out, "w") as f:
        json.dump({"device": device, "torch": torch.__version__, "date": date,
                   "method": method, "rows": rows}, f, indent=2)
        f.write("\n")
    print(f"\nwrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
