//! Quickstart: random inputs, one call, the error against the CPU reference and the time.
//!
//! ```sh
//! cargo run --release --example quickstart
//! ```
//!
//! Without a GPU it says what is missing and exits 0 (1 with `FLASH_ATTN_REQUIRE_GPU` set).

mod common;

use std::time::Instant;

use flash_attn::reference::{attention, random_normal, Precision};
use flash_attn::{AttentionShape, Dtype, Error, FlashAttention, ForwardOptions};
use half::f16;

fn main() -> Result<(), Error> {
    let attention_gpu = match FlashAttention::new() {
        Ok(attention_gpu) => attention_gpu,
        Err(Error::NoGpu(error)) => common::exit_without_gpu("quickstart", &error),
        Err(error) => return Err(error),
    };
    // 4 sequences of 1024 tokens, 16 heads of 64, causal: a small prefill.
    let shape = AttentionShape::new(4, 16, 1024, 64);
    let options = ForwardOptions {
        causal: true,
        ..ForwardOptions::default()
    };
    let q: Vec<f16> = random_normal(shape.q_elements()?, 0.5, 1.0, 1);
    let k: Vec<f16> = random_normal(shape.kv_elements()?, 0.5, 1.0, 2);
    let v: Vec<f16> = random_normal(shape.kv_elements()?, 0.5, 1.0, 3);
    let kernel = flash_attn::supports(Dtype::F16, &shape, &options, attention_gpu.sm_count())?;
    println!(
        "{} (compute capability {:?}): {shape:?}, causal, fp16, kernel {}",
        attention_gpu.device_name(),
        attention_gpu.compute_capability(),
        kernel.entry
    );

    // The first call loads the kernel; the second is timed. Each copies the inputs to the GPU,
    // runs and copies the output back.
    attention_gpu.forward_host(&q, &k, &v, shape, &options)?;
    let start = Instant::now();
    let output = attention_gpu.forward_host(&q, &k, &v, shape, &options)?;
    println!(
        "forward_host: {:.3} ms, copies to and from the GPU included (the first call, which \
         loaded the kernel, not counted)",
        start.elapsed().as_secs_f64() * 1e3
    );

    let scale = shape.default_softmax_scale() as f64;
    let exact = attention(&q, &k, &v, shape, scale, true, Precision::F64);
    let plain = attention(&q, &k, &v, shape, scale, true, Precision::Plain(Dtype::F16));
    let within = common::report_error(output.iter().map(|x| x.to_f64()), &exact, &plain);
    if !within {
        std::process::exit(1);
    }
    Ok(())
}
