//! What a process pays before its first launch: CUDA initialisation with the device checks and
//! the context, then the loading of each kernel's module (the default API's, or with `--all`
//! every exposed one), fallback defaults first, and for each whether
//! it came from a cubin built ahead of time or from the driver's JIT of its PTX.
//!
//! ```text
//! flash-attn-load-time          # as the library loads: the cubin for the device where built
//! flash-attn-load-time --ptx    # every kernel JIT-compiled from PTX (LoadOptions::force_ptx)
//! flash-attn-load-time --all    # every exposed kernel, not only the default API's
//! ```
//!
//! `CUDA_CACHE_DISABLE=1` gives the cold figures: otherwise the driver reuses JIT output cached
//! on disk by an earlier run (cubins are never JIT-compiled, so the cache does not affect them).

use std::process::ExitCode;
use std::time::Instant;

use flash_attn::{
    default_api_kernels, default_kernel, Dtype, Error, FlashAttention, ForwardKernel, LoadOptions,
    CUBINS, CUBINS_NOT_BUILT, FORWARD_KERNELS,
};

const USAGE: &str = "usage: flash-attn-load-time [--ptx] [--all]\n  \
    --ptx  JIT-compile every kernel from PTX even where a cubin for the device was built\n  \
    --all  load every exposed kernel (default: the kernels the default API can run)";

fn milliseconds_since(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

fn main() -> ExitCode {
    let mut options = LoadOptions::default();
    let mut all = false;
    for argument in std::env::args().skip(1) {
        match argument.as_str() {
            "--ptx" => options.force_ptx = true,
            "--all" => all = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("unknown argument {other:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    match measure(&options, all) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn measure(options: &LoadOptions, all: bool) -> Result<(), Error> {
    let cache = std::env::var("CUDA_CACHE_DISABLE").unwrap_or_default();
    println!(
        "JIT cache {}",
        if cache == "1" {
            "disabled (cold)"
        } else {
            "enabled (may be warm)"
        }
    );
    match CUBINS_NOT_BUILT {
        Some(reason) => println!("cubins: none embedded ({reason})"),
        None => println!(
            "cubins: {} embedded{}",
            CUBINS.len(),
            if options.force_ptx {
                ", not used (--ptx)"
            } else {
                ""
            }
        ),
    }
    let start = Instant::now();
    let gpu = FlashAttention::with_options(options)?;
    let (major, minor) = gpu.compute_capability();
    println!(
        "{:>8.1} ms  initialisation, device checks and context ({}, compute capability {major}.{minor})",
        milliseconds_since(start),
        gpu.device_name()
    );
    let mut defaults = Vec::new();
    for dtype in [Dtype::F16, Dtype::Bf16] {
        for head_dim in flash_attn::SUPPORTED_HEAD_DIMS {
            defaults.push(default_kernel(dtype, *head_dim)?);
        }
    }
    let others: Vec<&ForwardKernel> = if all {
        FORWARD_KERNELS.iter().collect()
    } else {
        default_api_kernels()
    };
    let others = others
        .into_iter()
        .filter(|kernel| !defaults.iter().any(|default| default.entry == kernel.entry));
    let (mut total, mut loaded) = (0.0, 0);
    for (kernel, role) in defaults
        .iter()
        .copied()
        .map(|kernel| (kernel, "default"))
        .chain(others.map(|kernel| (kernel, "")))
    {
        let start = Instant::now();
        let source = gpu.preload(kernel)?;
        let load = milliseconds_since(start);
        total += load;
        loaded += 1;
        println!(
            "{load:>8.1} ms  module load of {} {role:<7}  from {source}",
            kernel.entry
        );
    }
    println!(
        "{total:>8.1} ms  {loaded} kernels ({}), one module each",
        if all {
            "every exposed one"
        } else {
            "the default API's"
        }
    );
    Ok(())
}
