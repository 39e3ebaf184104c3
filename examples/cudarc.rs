//! Attention on cudarc buffers of half 2's bf16, on a cudarc stream, as a candle, burn or
//! mistral.rs program holds them: the README's cudarc snippet (between the markers), then the
//! error against the CPU reference and the time per call.
//!
//! ```sh
//! cargo run --release --features cudarc --example cudarc
//! ```
//!
//! Without a GPU it says what is missing and exits 0 (1 with `FLASH_ATTN_REQUIRE_GPU` set).
//! (This workspace names half 2 `half2`, beside the half 1.8 its tests use; a program with
//! only half 2 writes `half::bf16`.)

mod common;

use std::time::Instant;

use cudarc::driver::CudaContext;
use flash_attn::reference::{self, random_normal, Precision};
use flash_attn::{AttentionShape, Dtype, FlashAttention, ForwardOptions, Layout};
use half2::bf16;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // cudarc loads libcuda and opens the device's primary context; either failing means no
    // usable GPU.
    let context = match CudaContext::new(0) {
        Ok(context) => context,
        Err(error) => common::exit_without_gpu("cudarc", &error),
    };
    // README snippet: begin
    let stream = context.default_stream();
    // The same primary context: kernels loaded by flash-attn run on cudarc's streams and memory.
    let attention = FlashAttention::for_cudarc_context(&context)?;
    // 2 sequences of 512 tokens, 32 query heads over 8 K/V heads (GQA), head dim 128, causal,
    // tensors laid out [batch, seq, heads, head_dim].
    let shape = AttentionShape {
        batch: 2,
        heads_q: 32,
        heads_kv: 8,
        seq_len_q: 512,
        seq_len_kv: 512,
        head_dim: 128,
    };
    let options = ForwardOptions {
        causal: true,
        layout: Layout::Bshd,
        ..Default::default()
    };
    let q_host: Vec<bf16> = random_normal(shape.q_elements()?, 0.5, 1.0, 1);
    let k_host: Vec<bf16> = random_normal(shape.kv_elements()?, 0.5, 1.0, 2);
    let v_host: Vec<bf16> = random_normal(shape.kv_elements()?, 0.5, 1.0, 3);
    let q = stream.clone_htod(&q_host)?;
    let k = stream.clone_htod(&k_host)?;
    let v = stream.clone_htod(&v_host)?;
    let mut output = stream.alloc_zeros::<bf16>(shape.q_elements()?)?;
    let mut lse = stream.alloc_zeros::<f32>(shape.lse_elements()?)?;
    let on_stream = attention.on_cudarc_stream(&stream)?;
    on_stream.forward(&q, &k, &v, &mut output, Some(&mut lse), shape, &options)?;
    let output_host: Vec<bf16> = stream.clone_dtoh(&output)?;
    // README snippet: end
    println!(
        "{} through cudarc: {shape:?}, causal, bf16 (half 2), [batch, seq, heads, head_dim]",
        attention.device_name()
    );

    // The reference works in [batch, heads, seq, head_dim].
    let to_bhsd = |values: &[bf16], heads, seq_len| {
        let dims = (shape.batch, heads, seq_len, shape.head_dim);
        reference::relayout(values, dims, Layout::Bshd, Layout::Bhsd)
    };
    let (q_ref, k_ref, v_ref) = (
        to_bhsd(&q_host, shape.heads_q, shape.seq_len_q),
        to_bhsd(&k_host, shape.heads_kv, shape.seq_len_kv),
        to_bhsd(&v_host, shape.heads_kv, shape.seq_len_kv),
    );
    let scale = shape.default_softmax_scale() as f64;
    let exact = reference::attention(&q_ref, &k_ref, &v_ref, shape, scale, true, Precision::F64);
    let plain = reference::attention(
        &q_ref,
        &k_ref,
        &v_ref,
        shape,
        scale,
        true,
        Precision::Plain(Dtype::Bf16),
    );
    let output_bhsd = to_bhsd(&output_host, shape.heads_q, shape.seq_len_q);
    let within = common::report_error(output_bhsd.iter().map(|x| x.to_f64()), &exact, &plain);

    // Back-to-back calls on the stream, waited for once: the time per call on the GPU.
    let calls = 100;
    let start = Instant::now();
    for _ in 0..calls {
        on_stream.forward(&q, &k, &v, &mut output, None, shape, &options)?;
    }
    stream.synchronize()?;
    println!(
        "{:.1} µs per call ({calls} calls enqueued back to back on the cudarc stream)",
        start.elapsed().as_secs_f64() * 1e6 / calls as f64
    );
    if !within {
        std::process::exit(1);
    }
    Ok(())
}
