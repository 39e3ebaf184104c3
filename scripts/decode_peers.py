"""Decode peers: PyTorch SDPA (flash and cuDNN backends, enable_gqa) at the decode shapes that
flash-attn-decode-timing times (fp16 and bf16, D=128, one query row, 32 query heads over 8 K/V
heads), CUDA events around back-to-back launches, and the device's copy bandwidth."""
import statistics

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F

SHAPES = [(8, 8192), (1, 32768), (64, 2048)]


def time_us(fn, launches=100, repeats=30):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(launches):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / launches)
    times.sort()
    return statistics.median(times), times[len(times) // 10], times[(len(times) * 9) // 10]


def copy_bandwidth():
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    median, _, _ = time_us(lambda: dst.copy_(src), launches=10, repeats=10)
    return 2 * n / (median * 1e-6) / 1e12


def main():
    print(f"decode peers on {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"copy bandwidth (read + write): {copy_bandwidth():.2f} TB/s")
    for dtype, name in [(torch.float16, "f16"), (torch.bfloat16, "bf16")]:
        for batch, length in SHAPES:
            q = torch.randn(batch, 32, 1, 128, dtype=dtype, device="cuda") + 0.5
            k = torch.randn(batch, 8, length, 128, dtype=dtype, device="cuda") + 0.5
            v = torch.randn_like(k)
            kv_bytes = 2 * k.numel() * 2
            for backend, label in [(SDPBackend.FLASH_ATTENTION, "flash"), (SDPBackend.CUDNN_ATTENTION, "cudnn")]:
                try:
                    with sdpa_kernel(backend):
                        median, p10, p90 = time_us(
                            lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                        )
                    print(f"{name} B={batch} L={length} SDPA {label}: {median:.1f} us "
                          f"(p10-p90 {p10:.1f}-{p90:.1f}), K+V {kv_bytes / (median * 1e-6) / 1e12:.2f} TB/s")
                except Exception as error:  # a backend that does not take the shape
                    print(f"{name} B={batch} L={length} SDPA {label}: unavailable ({str(error)[:80]})")


if __name__ == "__main__":
    main()
