"""Varlen prefill peers: PyTorch's variable-length attention on the exact ragged batch that
`flash-attn-decode-timing --varlen-json PATH` times our `forward_varlen` on, side by side with
ours.

    python3 varlen_peers.py --ours PATH [--out PATH]

PATH is the JSON of `flash-attn-decode-timing --varlen-json PATH`: the batch's offsets and
lengths, the element type, heads and head dim, the timing counts, and our figures (the varlen
batch and the dense batch of its mean length, causal and not).

The batch. The script re-derives the lengths from the generator the tool uses
(`varlen_prefill_offsets`: SplitMix64, seed 2026, 16 lengths uniform in 128..=4096) and stops
unless they equal the file's; it prints them with their total and mean, so a log shows the batch
both sides ran.

The peers, on packed [tokens, heads, head_dim] tensors of the same element type drawn as
randn + 0.5 (as ours), causal and not:
  * torch.nn.attention.varlen.varlen_attn (FlashAttention-2's varlen forward, or whichever
    backend that function picks). Causal goes by `is_causal=` if the signature has it, else
    `window_size=(-1, 0)`; `enable_gqa=True` where the signature has it. A torch without it
    gets an "n/a" row saying so.
  * torch.ops.aten._flash_attention_forward with the same offsets: FlashAttention-2's varlen
    forward called directly (what varlen_attn wraps; the fallback where it is missing).
  In both, the K/V heads are passed as they are (grouped query attention, 32 query heads over
  8); only if a call refuses them are they repeated to the query heads (and the row says so).
  The lines "varlen path, ...:" say exactly which call ran.
  * SDPA (flash backend) over nested jagged tensors built from the same packed tensors and
    offsets (K/V repeated to the query heads if grouped heads are refused); optional: a failure
    is reported and the script carries on.
  * SDPA (flash and cuDNN backends, enable_gqa) on the dense batch of the mean length that our
    dense figure uses, [B, H, S, D].
Every varlen peer's output is checked, before it is timed, against an fp32 SDPA (math backend)
of each sequence alone; the largest absolute error is printed.

Timing: the same method as ours and as decode_peers.py: CUDA events around back-to-back launches,
with the warm-up, repeat and launch counts that the JSON gives (ours: 3 warm-up launches, 10
repeats of 5 launches); median and p10-p90 by linear interpolation (as ours), host time per
launch. TFLOP/s counts real work as ours does: 4 * H_q * sum(len_q * len_kv) * D, halved when
causal (dense: 4 * B * H_q * S * S * D, halved when causal); the script checks that its count
equals the one in the JSON. "time / ours" is a peer's median over our median on the same
problem (varlen rows against our varlen, dense rows against our dense): above 1, ours is faster.
On compute capability 9.0 our JSON also holds the sm80 family's kernel on the same batch
("varlen-sm80", which the default API runs elsewhere) and the head dim's other sm90 serving
tiles ("varlen-other-sm90"), against the default's sm90 one.
"""
import argparse
import inspect
import json
import math
import statistics
import time

MASK64 = (1 << 64) - 1
SEED, SEQUENCES, SHORTEST, LONGEST = 2026, 16, 128, 4096
DTYPE_NAMES = {"f16": "float16", "bf16": "bfloat16"}
# Largest absolute error against the fp32 reference that still counts as the same attention.
TOLERANCE = {"f16": 1e-2, "bf16": 4e-2}


# ---------------------------------------------------------------- the batch, without torch

class SplitMix64:
    """flash_attn::rng::SplitMix64, bit for bit."""

    def __init__(self, seed):
        self.state = seed & MASK64

    def next_u64(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, bound):
        return (self.next_u64() * bound) >> 64


def prefill_offsets():
    """tools/src/timing.rs's varlen_prefill_offsets(): the cumulative offsets of the batch."""
    rng = SplitMix64(SEED)
    offsets = [0]
    for _ in range(SEQUENCES):
        offsets.append(offsets[-1] + SHORTEST + rng.below(LONGEST - SHORTEST + 1))
    return offsets


def varlen_flops(lengths_q, lengths_kv, heads_q, head_dim, causal):
    """VarlenShape::flops: 4 * H_q * sum(Sq * Sk) * D, halved when causal."""
    full = 4.0 * heads_q * sum(q * k for q, k in zip(lengths_q, lengths_kv)) * head_dim
    return full / 2 if causal else full


def dense_flops(batch, heads_q, seq_len, head_dim, causal):
    """AttentionShape::flops at seq_len_q = seq_len_kv."""
    full = 4.0 * batch * heads_q * seq_len * seq_len * head_dim
    return full / 2 if causal else full


def quantile(sorted_values, q):
    """LaunchTimes::quantile: linear interpolation, q in 0..=1."""
    position = q * (len(sorted_values) - 1)
    low, high = math.floor(position), math.ceil(position)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def load_ours(path):
    """Our JSON, checked against the re-derived batch and our own FLOP count."""
    with open(path) as f:
        doc = json.load(f)
    offsets = prefill_offsets()
    lengths = [b - a for a, b in zip(offsets, offsets[1:])]
    if doc["cu_seqlens"] != offsets or doc["lengths"] != lengths:
        raise SystemExit(f"{path}: the batch differs from varlen_prefill_offsets() re-derived "
                         f"here: {doc['cu_seqlens']} against {offsets}")
    if doc["dtype"] not in DTYPE_NAMES:
        raise SystemExit(f"{path}: unknown dtype {doc['dtype']!r}")
    for entry in doc["results"]:
        if entry["problem"].startswith("varlen"):
            flops = varlen_flops(lengths, lengths, doc["heads_q"], doc["head_dim"],
                                 entry["causal"])
        else:
            flops = dense_flops(entry["batch"], doc["heads_q"], entry["seq_len"],
                                doc["head_dim"], entry["causal"])
        if not math.isclose(flops, entry["flops"], rel_tol=1e-12):
            raise SystemExit(f"{path}: FLOP count {entry['flops']} for {entry['problem']} "
                             f"causal={entry['causal']}, {flops} here")
    return doc


def first_line(exc):
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[0].strip()[:160] if lines else type(exc).__name__


# ---------------------------------------------------------------- the table

TABLE_COLUMNS = ("causal", "implementation", "median us", "p10-p90 us", "TFLOP/s",
                 "time / ours", "host us/launch", "max |err| (or why n/a)")


def table_cells(row):
    stats = row.get("stats")
    if stats is None:
        return (row["causal"], row["name"], "n/a", "n/a", "n/a", "n/a", "n/a",
                row.get("error", "")[:60])
    ratio = row.get("ratio")
    return (row["causal"], row["name"], f"{stats['median_us']:.1f}",
            f"{stats['p10_us']:.1f}-{stats['p90_us']:.1f}",
            f"{stats['flops'] / (stats['median_us'] * 1e-6) / 1e12:.1f}",
            "n/a" if ratio is None else f"{ratio:.3f}",
            "n/a" if stats.get("host_us_per_launch") is None
            else f"{stats['host_us_per_launch']:.1f}",
            "" if row.get("max_error") is None else f"{row['max_error']:.2e}")


def format_table(rows):
    lines = [TABLE_COLUMNS] + [table_cells(row) for row in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(TABLE_COLUMNS))]

    def render(cells):
        left = [cells[i].ljust(widths[i]) for i in (0, 1)]
        right = [cell.rjust(width) for cell, width in zip(cells[2:], widths[2:])]
        return "  ".join(left + right).rstrip()

    rule = "-" * len(render(TABLE_COLUMNS))
    return "\n".join([render(TABLE_COLUMNS), rule, *(render(cells) for cells in lines[1:])])


def ours_row(entry, label):
    stats = {key: entry[key] for key in ("median_us", "p10_us", "p90_us", "flops")}
    stats["host_us_per_launch"] = entry.get("host_us_per_launch")
    return {"causal": "yes" if entry["causal"] else "no", "name": label, "stats": stats,
            "kernel": entry["kernel"], "ratio": 1.0}


# ---------------------------------------------------------------- GPU

def time_us(fn, warmup, launches, repeats, flops):
    """CUDA events around `launches` back-to-back calls, `repeats` times, after `warmup` calls:
    median, p10 and p90 of the per-call time (us), host time per call (median)."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times, host = [], []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        host_start = time.perf_counter()
        for _ in range(launches):
            fn()
        host.append((time.perf_counter() - host_start) * 1e6 / launches)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / launches)
    times.sort()
    return {"median_us": statistics.median(times), "p10_us": quantile(times, 0.1),
            "p90_us": quantile(times, 0.9), "host_us_per_launch": statistics.median(host),
            "flops": flops}


def reference(q, k, v, offsets, causal):
    """fp32 SDPA (math backend) of each sequence alone, packed as q: [tokens, H_q, D]."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    group = q.shape[1] // k.shape[1]
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    with sdpa_kernel(SDPBackend.MATH):
        for a, b in zip(offsets, offsets[1:]):
            qs = q[a:b].float().transpose(0, 1)
            ks = k[a:b].float().repeat_interleave(group, dim=1).transpose(0, 1)
            vs = v[a:b].float().repeat_interleave(group, dim=1).transpose(0, 1)
            out[a:b] = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal).transpose(0, 1)
    return out


def varlen_attn_call(q, k, v, cu, max_len, causal):
    """torch.nn.attention.varlen.varlen_attn on (q, k, v), and how it was called; raises
    RuntimeError if this torch has no such function (or none that takes causal)."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError as exc:
        raise RuntimeError(f"no torch.nn.attention.varlen.varlen_attn ({exc})") from None
    params = inspect.signature(varlen_attn).parameters
    kwargs = {}
    if "is_causal" in params:
        kwargs["is_causal"] = causal
    elif "window_size" in params:
        kwargs["window_size"] = (-1, 0) if causal else (-1, -1)
    elif causal:
        raise RuntimeError(f"varlen_attn{inspect.signature(varlen_attn)} takes no causal switch")
    if "enable_gqa" in params:
        kwargs["enable_gqa"] = True

    def call():
        out = varlen_attn(q, k, v, cu, cu, max_len, max_len, **kwargs)
        return out[0] if isinstance(out, tuple) else out

    how = ", ".join(f"{key}={value!r}" for key, value in kwargs.items())
    return call, f"torch.nn.attention.varlen.varlen_attn(q, k, v, cu, cu, {max_len}, {max_len}, {how})"


def aten_flash_call(q, k, v, cu, max_len, causal):
    """FlashAttention-2's varlen forward as PyTorch carries it, called directly (what
    varlen_attn wraps, or the fallback where varlen_attn is missing)."""
    import torch

    def call():
        return torch.ops.aten._flash_attention_forward(
            q, k, v, cu, cu, max_len, max_len, 0.0, causal, False)[0]

    return call, (f"torch.ops.aten._flash_attention_forward(q, k, v, cu, cu, {max_len}, "
                  f"{max_len}, 0.0, {causal}, False)")


def nested_call(q, k, v, offsets64, causal):
    """SDPA (flash backend) over nested jagged [B, H, j, D] views of the packed tensors."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def jagged(values):
        return torch.nested.nested_tensor_from_jagged(values, offsets64).transpose(1, 2)

    qn, kn, vn = jagged(q), jagged(k), jagged(v)

    def call():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            out = F.scaled_dot_product_attention(qn, kn, vn, is_causal=causal)
        return out.transpose(1, 2).values()

    return call


def checked_peer(name, make_call, q, k, v, expanded, ref, tolerance):
    """Runs make_call(q, k, v) once and checks it against `ref`; if it refuses the grouped K/V
    heads, again with K/V repeated to the query heads. Returns (call, name, max error)."""
    import torch

    error = None
    for repeat in (False, True):
        keys, values = expanded() if repeat else (k, v)
        label = f"{name}, K/V repeated to {q.shape[1]} heads" if repeat else name
        call = make_call(q, keys, values)  # RuntimeError when this torch has no such call
        try:
            out = call()
            torch.cuda.synchronize()
        except Exception as exc:  # whatever a torch build raises for what it does not take
            error = exc
            print(f"  {label}: refused: {first_line(exc)}", flush=True)
            continue
        if out.shape != ref.shape or not torch.isfinite(out).all().item():
            print(f"  {label}: output of shape {tuple(out.shape)} not finite or not the "
                  f"queries' shape", flush=True)
            error = RuntimeError("wrong output")
            continue
        max_error = (out.float() - ref).abs().max().item()
        if max_error > tolerance:
            print(f"  {label}: max |err| {max_error:.2e} against the fp32 reference, above "
                  f"{tolerance:g}: not the same attention", flush=True)
            error = RuntimeError(f"max |err| {max_error:.2e}")
            continue
        return call, label, max_error
    raise RuntimeError(first_line(error))


def dense_peer(backend, batch, heads_q, heads_kv, seq_len, head_dim, dtype, causal):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]
    q = torch.randn(batch, heads_q, seq_len, head_dim, dtype=dtype, device="cuda") + 0.5
    k = torch.randn(batch, heads_kv, seq_len, head_dim, dtype=dtype, device="cuda") + 0.5
    v = torch.randn_like(k) + 0.5

    def call():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)

    if not torch.isfinite(call()).all().item():
        raise RuntimeError("output contains NaN or Inf")
    return call


def run(doc, counts):
    import torch

    warmup, launches, repeats = counts
    dtype = getattr(torch, DTYPE_NAMES[doc["dtype"]])
    heads_q, heads_kv, head_dim = doc["heads_q"], doc["heads_kv"], doc["head_dim"]
    offsets, lengths = doc["cu_seqlens"], doc["lengths"]
    tokens, max_len = offsets[-1], max(lengths)
    group = heads_q // heads_kv
    q = torch.randn(tokens, heads_q, head_dim, dtype=dtype, device="cuda") + 0.5
    k = torch.randn(tokens, heads_kv, head_dim, dtype=dtype, device="cuda") + 0.5
    v = torch.randn_like(k) + 0.5
    cu = torch.tensor(offsets, dtype=torch.int32, device="cuda")
    offsets64 = cu.long()
    expanded_kv = []

    def expanded():
        if not expanded_kv:
            expanded_kv.extend(t.repeat_interleave(group, dim=1).contiguous() for t in (k, v))
        return expanded_kv

    rows = []
    for causal in (False, True):
        mark = "yes" if causal else "no"
        ours = {entry["problem"]: entry for entry in doc["results"]
                if entry["causal"] == causal}
        ref = reference(q, k, v, offsets, causal)
        flops = varlen_flops(lengths, lengths, heads_q, head_dim, causal)
        rows.append(ours_row(ours["varlen"], "ours forward_varlen"))
        for other in (entry for entry in doc["results"]
                      if entry["causal"] == causal and entry["problem"] == "varlen-other-sm90"):
            row = ours_row(other, f"ours forward_varlen, {other['kernel']}")
            row["ratio"] = other["median_us"] / ours["varlen"]["median_us"]
            rows.append(row)
        if "varlen-sm80" in ours:
            sm80 = ours_row(ours["varlen-sm80"], "ours forward_varlen, sm80 kernel")
            sm80["ratio"] = ours["varlen-sm80"]["median_us"] / ours["varlen"]["median_us"]
            rows.append(sm80)
        peers = [
            ("torch varlen_attn",
             lambda q_, k_, v_: varlen_attn_call(q_, k_, v_, cu, max_len, causal)),
            ("aten._flash_attention_forward (FA2)",
             lambda q_, k_, v_: aten_flash_call(q_, k_, v_, cu, max_len, causal)),
            ("SDPA flash, nested jagged",
             lambda q_, k_, v_: (nested_call(q_, k_, v_, offsets64, causal), None)),
        ]
        for name, make in peers:
            descriptions = []

            def make_call(q_, k_, v_, make=make, descriptions=descriptions):
                call, how = make(q_, k_, v_)
                if how is not None:
                    descriptions.append(how)
                return call

            try:
                call, label, max_error = checked_peer(name, make_call, q, k, v, expanded, ref,
                                                      TOLERANCE[doc["dtype"]])
            except Exception as exc:  # an optional peer this torch lacks: an "n/a" row
                rows.append({"causal": mark, "name": name, "error": first_line(exc)})
                continue
            if descriptions:
                print(f"varlen path, causal={causal}, {label}: {descriptions[-1]}",
                      flush=True)
            stats = time_us(call, warmup, launches, repeats, flops)
            rows.append({"causal": mark, "name": label, "stats": stats, "max_error": max_error,
                         "ratio": stats["median_us"] / ours["varlen"]["median_us"]})
        del ref
        dense = ours["dense"]
        rows.append(ours_row(dense, f"ours forward, dense B={dense['batch']} "
                                    f"S={dense['seq_len']}"))
        for backend in ("flash", "cudnn"):
            name = f"SDPA {backend}, dense B={dense['batch']} S={dense['seq_len']}"
            try:
                call = dense_peer(backend, dense["batch"], heads_q, heads_kv, dense["seq_len"],
                                  head_dim, dtype, causal)
            except Exception as exc:  # a backend that does not take the shape
                rows.append({"causal": mark, "name": name, "error": first_line(exc)})
                continue
            stats = time_us(call, warmup, launches, repeats,
                            dense_flops(dense["batch"], heads_q, dense["seq_len"], head_dim,
                                        causal))
            del call
            rows.append({"causal": mark, "name": name, "stats": stats,
                         "ratio": stats["median_us"] / dense["median_us"]})
        torch.cuda.empty_cache()
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Time PyTorch's varlen attention on the ragged prefill batch of "
                    "flash-attn-decode-timing --varlen-json, beside our figures.")
    parser.add_argument("--ours", required=True, help="the JSON of --varlen-json (input)")
    parser.add_argument("--out", help="where to write the table's rows as JSON")
    parser.add_argument("--warmup", type=int, help="warm-up launches (default: as ours)")
    parser.add_argument("--launches", type=int, help="launches per repeat (default: as ours)")
    parser.add_argument("--repeats", type=int, help="repeats (default: as ours)")
    args = parser.parse_args(argv)
    doc = load_ours(args.ours)
    counts = (args.warmup if args.warmup is not None else doc["warmup"],
              args.launches or doc["launches_per_repeat"], args.repeats or doc["repeats"])

    import torch

    if not torch.cuda.is_available():
        raise SystemExit("CUDA is not available")
    torch.manual_seed(0)
    device = torch.cuda.get_device_name()
    lengths = doc["lengths"]
    print(f"varlen peers on {device}, torch {torch.__version__}; ours timed on {doc['device']}"
          + ("" if doc["device"] == device else " (WARNING: not this device)"))
    print(f"batch: {len(lengths)} sequences of {lengths} tokens ({sum(lengths)} in all, "
          f"mean {doc['mean_length']}); the same as varlen_prefill_offsets() re-derived here "
          f"(SplitMix64 seed {SEED})")
    print(f"{doc['dtype']} D={doc['head_dim']} H={doc['heads_q']}/{doc['heads_kv']}, packed "
          f"[tokens, heads, D]; CUDA events around {counts[1]} back-to-back launches, "
          f"{counts[0]} warm-up, {counts[2]} repeats (ours: {doc['launches_per_repeat']}, "
          f"{doc['warmup']}, {doc['repeats']}); TFLOP/s of real work", flush=True)
    rows = run(doc, counts)
    print(flush=True)
    print(format_table(rows), flush=True)
    print("ours: " + "; ".join(f"{row['name']} causal={row['causal']}: {row['kernel']}"
                               for row in rows if "kernel" in row), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": device, "torch": torch.__version__, "ours_device": doc["device"],
                       "lengths": lengths, "dtype": doc["dtype"], "rows": rows}, f, indent=2)
            f.write("\n")
        print(f"wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
