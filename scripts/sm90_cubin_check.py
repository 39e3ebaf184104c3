"""Checks and times kernel entries of a cubin (or PTX) directly through the CUDA driver API,
before they are wired into the crate: the first check of a new family's main loop.

    python3 sm90_cubin_check.py MODULE ENTRY[,ENTRY...] [check|time|both]

Each entry name ends in `_{f16|bf16}_d{D}_m{M}_n{N}_w{W}_s{S}`, from which the launch is
derived (grid, 32 W threads, the dynamic shared memory of `TileConfig::smem_bytes`). Inputs are
[B, H, S, D] with random normal values (nonzero mean), the output and the logsumexp poisoned
with NaN; each output is held to twice the error of a plain 16-bit implementation plus 1e-3
against an fp32 reference, and the logsumexp to 1e-3 (natural log). Timing: CUDA events around
20 back-to-back launches, median of 10, beside PyTorch SDPA's flash and cuDNN backends timed
the same way in the same process.
"""
import ctypes, math, re, struct, sys, statistics
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend

cuda = ctypes.CDLL("libcuda.so.1")
def check(r, what):
    if r != 0:
        raise RuntimeError(f"{what}: CUresult {r}")
torch.zeros(1, device="cuda")
mod = ctypes.c_void_p()
check(cuda.cuModuleLoad(ctypes.byref(mod), sys.argv[1].encode()), "cuModuleLoad")
names = sys.argv[2].split(",")
mode = sys.argv[3] if len(sys.argv) > 3 else "both"

def config(name):
    m = re.match(r"\w+?_(f16|bf16)_d(\d+)_m(\d+)_n(\d+)_w(\d+)_s(\d+)", name)
    dt, d, bm, bn, w, s = m.groups()
    d, bm, bn, w, s = map(int, (d, bm, bn, w, s))
    return (torch.float16 if dt == "f16" else torch.bfloat16), d, bm, bn, w, s

funcs = {}
def func(name):
    if name not in funcs:
        f = ctypes.c_void_p()
        check(cuda.cuModuleGetFunction(ctypes.byref(f), mod, name.encode()), "get " + name)
        dt, d, bm, bn, w, s = config(name)
        smem = bm * d * 2 + s * 2 * bn * d * 2
        check(cuda.cuFuncSetAttribute(f, 8, smem), "smem attr")
        funcs[name] = (f, smem)
    return funcs[name]

def launch(name, q, k, v, o, lse, causal):
    f, smem = func(name)
    dt, d, bm, bn, w, s = config(name)
    B, Hq, Sq, D = q.shape
    _, Hk, Sk, _ = k.shape
    st = lambda t: (t.stride(0), t.stride(1), t.stride(2))
    scale_log2 = (1.0 / math.sqrt(D)) * math.log2(math.e)
    buf = struct.pack("<5Q12Q4If3I", q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
                      0 if lse is None else lse.data_ptr(), *st(q), *st(k), *st(v), *st(o),
                      Sq, Sk, Hq, Hq // Hk, scale_log2, 1 if causal else 0, D, 0)
    cbuf = ctypes.create_string_buffer(buf, len(buf))
    args = (ctypes.c_void_p * 1)(ctypes.cast(cbuf, ctypes.c_void_p))
    grid = ((Sq + bm - 1) // bm, Hq, B)
    stream = torch.cuda.current_stream().cuda_stream
    check(cuda.cuLaunchKernel(f, *grid, 32 * w, 1, 1, smem, ctypes.c_void_p(stream), args, None), "launch")

def reference(q, k, v, causal):
    B, Hq, Sq, D = q.shape
    Hk, Sk = k.shape[1], k.shape[2]
    kk = k.float().repeat_interleave(Hq // Hk, dim=1)
    vv = v.float().repeat_interleave(Hq // Hk, dim=1)
    s = (q.float() @ kk.transpose(-1, -2)) / math.sqrt(D)
    if causal:
        i = torch.arange(Sq, device="cuda")[:, None]
        j = torch.arange(Sk, device="cuda")[None, :]
        s = s.masked_fill(j > i + Sk - Sq, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return p @ vv, torch.logsumexp(s, dim=-1)

def plain16(q, k, v, causal):
    # A plain 16-bit implementation: scores and probabilities rounded to the element type.
    B, Hq, Sq, D = q.shape
    Hk, Sk = k.shape[1], k.shape[2]
    kk = k.repeat_interleave(Hq // Hk, dim=1); vv = v.repeat_interleave(Hq // Hk, dim=1)
    s = ((q @ kk.transpose(-1, -2)).float() / math.sqrt(D))
    if causal:
        i = torch.arange(Sq, device="cuda")[:, None]; j = torch.arange(Sk, device="cuda")[None, :]
        s = s.masked_fill(j > i + Sk - Sq, float("-inf"))
    return (torch.softmax(s, dim=-1).to(q.dtype) @ vv).float()

failures = 0
if mode in ("both", "check"):
    shapes = [(1, 2, 2, 1, 1), (2, 4, 2, 17, 100), (1, 8, 2, 257, 1000), (2, 4, 4, 1000, 257), (1, 2, 1, 128, 128), (1, 3, 3, 200, 200)]
    for name in names:
        dt, d, *_ = config(name)
        worst = 0.0
        for (B, Hq, Hk, Sq, Sk) in shapes:
            for causal in (False, True):
                q = (torch.randn(B, Hq, Sq, d, device="cuda") + 0.5).to(dt)
                k = (torch.randn(B, Hk, Sk, d, device="cuda") + 0.5).to(dt)
                v = (torch.randn(B, Hk, Sk, d, device="cuda") + 0.5).to(dt)
                o = torch.full((B, Hq, Sq, d), float("nan"), device="cuda", dtype=dt)
                lse = torch.full((B, Hq, Sq), float("nan"), device="cuda")
                launch(name, q, k, v, o, lse, causal)
                torch.cuda.synchronize()
                ref, ref_lse = reference(q, k, v, causal)
                err = (o.float() - ref).abs()
                plain = (plain16(q, k, v, causal) - ref).abs()
                # Rows that see no key (causal, more queries than keys): the reference is NaN there.
                valid = ~torch.isnan(ref)
                e = err[valid].max().item() if valid.any() else 0.0
                pe = plain[valid].max().item() if valid.any() else 0.0
                nan_bad = torch.isnan(o.float())[valid].any().item()
                rows = valid.all(dim=-1)
                lse_e = (lse - ref_lse).abs()[rows].max().item() if rows.any() else 0.0
                lse_bad = torch.isnan(lse)[rows].any().item()
                ok = (not nan_bad) and (not lse_bad) and e <= 2 * pe + 1e-3 and lse_e <= 1e-3
                if not ok:
                    failures += 1
                    print(f"FAIL {name} {(B,Hq,Hk,Sq,Sk)} causal={causal}: max err {e:.3e} plain {pe:.3e} lse err {lse_e:.3e} nan={nan_bad or lse_bad}")
                worst = max(worst, e / (2 * pe + 1e-3))
        print(f"check {name}: worst err/(2 plain + 1e-3) = {worst:.3f}")

def bench(fn, reps=10, inner=20):
    fn(); torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(inner):
            fn()
        b.record(); torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1000 / inner)
    return statistics.median(times)

if mode in ("both", "time"):
    anchors = {32: [(8, 16, 2048)], 64: [(32, 16, 512), (8, 16, 2048)], 96: [(8, 16, 2048)], 128: [(4, 8, 512), (2, 16, 4096)], 160: [(4, 16, 2048)], 192: [(4, 16, 2048)], 256: [(4, 16, 2048)]}
    for name in names:
        dt, d, *_ = config(name)
        for (B, H, S) in anchors[d]:
            for causal in (False, True):
                q = torch.randn(B, H, S, d, device="cuda", dtype=dt)
                k = torch.randn(B, H, S, d, device="cuda", dtype=dt)
                v = torch.randn(B, H, S, d, device="cuda", dtype=dt)
                o = torch.empty_like(q)
                ours = bench(lambda: launch(name, q, k, v, o, None, causal))
                peers = {}
                for label, backend in (("fa2", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                    try:
                        with sdpa_kernel(backend):
                            peers[label] = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                    except Exception as e:
                        peers[label] = float("nan")
                flops = 4 * B * H * S * S * d / (2 if causal else 1)
                print(f"time {name} {B},{H},{S},{d} causal={int(causal)}: ours {ours:.1f} us ({flops/ours/1e6:.0f} TF/s) fa2 {peers['fa2']:.1f} cudnn {peers['cudnn']:.1f} fa2/ours {peers['fa2']/ours:.2f}")
print("failures", failures)
