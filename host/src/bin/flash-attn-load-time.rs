//! What a process pays before its first launch: CUDA initialisation with the device checks and
//! the context, then the JIT compilation of each kernel's module, defaults first.
//!
//! `CUDA_CACHE_DISABLE=1 flash-attn-load-time` gives the cold figures: otherwise the driver
//! reuses JIT output cached on disk by an earlier run.

use std::time::Instant;

use flash_attn::{default_kernel, Dtype, Error, FlashAttention, FORWARD_KERNELS};

fn milliseconds_since(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

fn main() -> Result<(), Error> {
    let cache = std::env::var("CUDA_CACHE_DISABLE").unwrap_or_default();
    println!(
        "JIT cache {}",
        if cache == "1" {
            "disabled (cold)"
        } else {
            "enabled (may be warm)"
        }
    );
    let start = Instant::now();
    let gpu = FlashAttention::new()?;
    println!(
        "{:>8.1} ms  initialisation, device checks and context ({})",
        milliseconds_since(start),
        gpu.device_name()
    );
    let mut defaults = Vec::new();
    for dtype in [Dtype::F16, Dtype::Bf16] {
        for head_dim in flash_attn::SUPPORTED_HEAD_DIMS {
            defaults.push(default_kernel(dtype, *head_dim)?);
        }
    }
    let others = FORWARD_KERNELS
        .iter()
        .filter(|kernel| !defaults.iter().any(|default| default.entry == kernel.entry));
    let mut total = 0.0;
    for (kernel, role) in defaults
        .iter()
        .copied()
        .map(|kernel| (kernel, "default"))
        .chain(others.map(|kernel| (kernel, "")))
    {
        let start = Instant::now();
        gpu.preload(kernel)?;
        let jit = milliseconds_since(start);
        total += jit;
        println!(
            "{jit:>8.1} ms  module load + JIT of {} {role}",
            kernel.entry
        );
    }
    println!(
        "{total:>8.1} ms  all {} kernels, one module each",
        FORWARD_KERNELS.len()
    );
    Ok(())
}
