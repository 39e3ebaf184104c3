//! What the examples share: what to say where there is no GPU, and the check against the CPU
//! reference.

use std::fmt::Display;

use flash_attn::reference::{error_stats, within_tolerance, ReferenceOutput};

/// Says what is missing and exits: with status 0, so that `cargo run --example` on a machine
/// without a GPU ends cleanly after saying so, or 1 where `FLASH_ATTN_REQUIRE_GPU` is set (the
/// GPU bundle sets it, so that there a missing GPU fails).
pub fn exit_without_gpu(example: &str, error: &dyn Display) -> ! {
    eprintln!(
        "The {example} example needs an NVIDIA GPU of compute capability 8.0 or newer (A100, \
         RTX 30x0 and later, H100) with a driver for CUDA 11.8 or newer; none is usable here: \
         {error}."
    );
    let required = std::env::var_os("FLASH_ATTN_REQUIRE_GPU").is_some();
    std::process::exit(if required { 1 } else { 0 })
}

/// Prints the error of `output` against the f64 reference (`exact`) beside that of a plain
/// 16-bit implementation (`plain`), and whether it is within the GPU tests' tolerance; returns
/// that verdict.
pub fn report_error(
    output: impl IntoIterator<Item = f64>,
    exact: &ReferenceOutput,
    plain: &ReferenceOutput,
) -> bool {
    let ours = error_stats(output, &exact.output);
    let plain = error_stats(plain.output.iter().copied(), &exact.output);
    let ok = within_tolerance(&ours, &plain);
    println!(
        "error against the f64 CPU reference: max {:.2e}, mean {:.2e} (a plain 16-bit \
         implementation: max {:.2e}, mean {:.2e}): {}",
        ours.max_abs,
        ours.mean_abs,
        plain.max_abs,
        plain.mean_abs,
        if ok {
            "within tolerance"
        } else {
            "BEYOND TOLERANCE"
        }
    );
    ok
}
