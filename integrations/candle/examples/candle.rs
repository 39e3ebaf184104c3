//! flash-attn on candle CUDA tensors: `flash_attn(&q, &k, &v, scale, causal)` once, its error
//! against flash-attn's f64 CPU reference and against attention computed by candle's own ops
//! (f32 matmuls and softmax on the GPU), then the time per call beside candle's; then the
//! variants (a strided view, a sliding window, a KV cache) against candle's attention, ALiBi
//! (slopes per head, and per sequence and head with a window) against the f64 CPU reference,
//! ALiBi on the KV-cache, paged and variable-length calls against candle's attention with the
//! same biases, and the errors for a CPU tensor, an f32 one and f16 slopes.
//!
//! ```sh
//! cd integrations/candle && source env.sh && cargo run --release --example candle
//! ```
//!
//! Without a usable GPU it says what is missing and exits 0 (1 with `FLASH_ATTN_REQUIRE_GPU`
//! set). Exits 1 where a result is beyond the tolerance.

use std::time::Instant;

use candle_core::{DType, Device, IndexOp, Tensor, D};
use flash_attn::reference::{
    self, error_stats, random_normal, within_tolerance, Precision, Scoring,
};
use flash_attn::{AlibiLayout, AlibiSlopes, AttentionShape, Dtype, Layout};
use flash_attn_candle::{
    flash_attn, flash_attn_alibi, flash_attn_alibi_windowed, flash_attn_kv_cache,
    flash_attn_kv_cache_alibi, flash_attn_paged_kv_cache_alibi, flash_attn_varlen_alibi,
    flash_attn_windowed, ForwardOptions, SlidingWindow,
};
use half::bf16;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = match Device::new_cuda(0) {
        Ok(device) => device,
        Err(error) => {
            eprintln!(
                "The candle example needs an NVIDIA GPU of compute capability 8.0 or newer \
                 (A100 and later) with a driver for CUDA 13.0 or newer, and CUDA 13's cuBLAS, \
                 cuRAND and runtime libraries (candle links them); none is usable here: {}.",
                first_line(&error)
            );
            let required = std::env::var_os("FLASH_ATTN_REQUIRE_GPU").is_some();
            std::process::exit(if required { 1 } else { 0 })
        }
    };
    let mut ok = true;

    // 2 sequences of 512 tokens, 32 query heads over 8 K/V heads (GQA), head dim 128, causal,
    // bf16, [batch, seq, heads, head_dim] as candle-flash-attn takes them.
    let shape = AttentionShape {
        batch: 2,
        heads_q: 32,
        heads_kv: 8,
        seq_len_q: 512,
        seq_len_kv: 512,
        head_dim: 128,
    };
    let dims_q = (shape.batch, shape.seq_len_q, shape.heads_q, shape.head_dim);
    let dims_kv = (
        shape.batch,
        shape.seq_len_kv,
        shape.heads_kv,
        shape.head_dim,
    );
    let q_host: Vec<bf16> = random_normal(shape.q_elements()?, 0.5, 1.0, 1);
    let k_host: Vec<bf16> = random_normal(shape.kv_elements()?, 0.5, 1.0, 2);
    let v_host: Vec<bf16> = random_normal(shape.kv_elements()?, 0.5, 1.0, 3);
    let q = Tensor::from_slice(&q_host, dims_q, &device)?;
    let k = Tensor::from_slice(&k_host, dims_kv, &device)?;
    let v = Tensor::from_slice(&v_host, dims_kv, &device)?;
    let scale = shape.default_softmax_scale();

    let start = Instant::now();
    let output = flash_attn(&q, &k, &v, scale, true)?;
    device.synchronize()?;
    let first_call = start.elapsed();
    println!(
        "flash_attn on candle {:?}: q {:?}, k and v {:?}, causal, {:?}: output {:?} (first call, \
         with the kernels' loading: {:.0} ms)",
        device.location(),
        q.dims(),
        k.dims(),
        q.dtype(),
        output.dims(),
        first_call.as_secs_f64() * 1e3
    );

    // Against flash-attn's CPU reference, which works in [batch, heads, seq, head_dim].
    let to_bhsd = |values: &[bf16], heads, seq_len| {
        let dims = (shape.batch, heads, seq_len, shape.head_dim);
        reference::relayout(values, dims, Layout::Bshd, Layout::Bhsd)
    };
    let (q_ref, k_ref, v_ref) = (
        to_bhsd(&q_host, shape.heads_q, shape.seq_len_q),
        to_bhsd(&k_host, shape.heads_kv, shape.seq_len_kv),
        to_bhsd(&v_host, shape.heads_kv, shape.seq_len_kv),
    );
    let reference_check = |what: &str, output: &Tensor, scoring: &Scoring| {
        check_against_reference(what, output, scoring, shape, (&q_ref, &k_ref, &v_ref))
    };
    ok &= reference_check(
        "error against the f64 CPU reference",
        &output,
        &Scoring::plain(scale as f64, true),
    )?;

    // Against candle's own attention (f32 on the GPU).
    let candle_output = candle_attention(&q, &k, &v, scale, Mask::Causal)?;
    ok &= compare("candle's f32 attention", &output, &candle_output, 2e-2)?;

    // Back-to-back calls, waited for once: the time per call beside candle's attention (bf16
    // matmuls through cuBLAS, the softmax in f32).
    let calls = 50;
    let time = |body: &dyn Fn() -> candle_core::Result<Tensor>| -> candle_core::Result<f64> {
        body()?;
        device.synchronize()?;
        let start = Instant::now();
        for _ in 0..calls {
            body()?;
        }
        device.synchronize()?;
        Ok(start.elapsed().as_secs_f64() * 1e6 / calls as f64)
    };
    let flash = time(&|| flash_attn(&q, &k, &v, scale, true))?;
    let naive = time(&|| candle_attention_bf16(&q, &k, &v, scale))?;
    println!(
        "{flash:.1} µs per flash_attn call; candle's matmul-softmax-matmul attention: \
         {naive:.1} µs ({calls} calls each, enqueued back to back)"
    );

    // A strided view: Q made [batch, heads, seq, head_dim] and transposed, read in place.
    let q_bhsd = q.transpose(1, 2)?.contiguous()?;
    let q_view = q_bhsd.transpose(1, 2)?;
    assert!(!q_view.is_contiguous());
    let strided = flash_attn(&q_view, &k, &v, scale, true)?;
    ok &= compare(
        "a transposed (strided) q, against the contiguous call",
        &strided,
        &output,
        0.0,
    )?;

    // A sliding window of 128 keys before each query and none after it.
    let windowed = flash_attn_windowed(&q, &k, &v, scale, Some(128), Some(0))?;
    let windowed_candle = candle_attention(&q, &k, &v, scale, Mask::Window(128))?;
    ok &= compare(
        "flash_attn_windowed(128, 0)",
        &windowed,
        &windowed_candle,
        2e-2,
    )?;

    // Decoding: one new query per sequence against caches of 1024 slots of which 700 and 300
    // are used.
    let cache_slots = 1024;
    let used = [700u32, 300];
    let k_cache =
        Tensor::randn(0f32, 1.0, (2, cache_slots, 8, 128), &device)?.to_dtype(DType::BF16)?;
    let v_cache =
        Tensor::randn(0f32, 1.0, (2, cache_slots, 8, 128), &device)?.to_dtype(DType::BF16)?;
    let q_step = q.narrow(1, 0, 1)?;
    let cache_lens = Tensor::new(&used[..], &device)?;
    let options = ForwardOptions {
        softmax_scale: Some(scale),
        causal: true,
        ..ForwardOptions::default()
    };
    // Sequence `sequence`'s query and the `length` keys of its cache that it uses.
    let used_cache = |sequence: usize, length: usize| -> candle_core::Result<[Tensor; 3]> {
        let one = |tensor: &Tensor| tensor.i(sequence..sequence + 1);
        Ok([
            one(&q_step)?,
            one(&k_cache)?.narrow(1, 0, length)?,
            one(&v_cache)?.narrow(1, 0, length)?,
        ])
    };
    let decoded = flash_attn_kv_cache(&q_step, &k_cache, &v_cache, &cache_lens, &options)?;
    for (sequence, &length) in used.iter().enumerate() {
        let length = length as usize;
        let [q_used, k_used, v_used] = used_cache(sequence, length)?;
        let expected = candle_attention(&q_used, &k_used, &v_used, scale, Mask::Causal)?;
        let what = format!("flash_attn_kv_cache, sequence {sequence} ({length} keys used)");
        ok &= compare(&what, &decoded.i(sequence..sequence + 1)?, &expected, 2e-2)?;
    }

    // ALiBi with BLOOM's slopes, one per query head, causal; then one per sequence and head
    // (each sequence's a little steeper), within a window of 128 keys before each query: each
    // against the f64 reference with the same slopes, by the rule of the first call.
    let per_head: Vec<f32> = (0..shape.heads_q)
        .map(|h| 2f32.powf(-8.0 * (h + 1) as f32 / shape.heads_q as f32))
        .collect();
    let per_sequence: Vec<f32> = (0..shape.batch * shape.heads_q)
        .map(|i| per_head[i % shape.heads_q] * (1.0 + 0.25 * (i / shape.heads_q) as f32))
        .collect();
    let alibi = |slopes, layout| AlibiSlopes { slopes, layout };
    let slopes = Tensor::from_slice(&per_head, shape.heads_q, &device)?;
    let alibi_output = flash_attn_alibi(&q, &k, &v, &slopes, scale, true)?;
    let scoring = Scoring {
        alibi: Some(alibi(&per_head, AlibiLayout::PerHead)),
        ..Scoring::plain(scale as f64, true)
    };
    ok &= reference_check(
        "flash_attn_alibi, slopes [heads_q], causal",
        &alibi_output,
        &scoring,
    )?;
    let slopes_2d = Tensor::from_slice(&per_sequence, (shape.batch, shape.heads_q), &device)?;
    let alibi_output =
        flash_attn_alibi_windowed(&q, &k, &v, &slopes_2d, scale, Some(128), Some(0))?;
    let scoring = Scoring {
        window: Some(SlidingWindow {
            left: Some(128),
            right: Some(0),
        }),
        alibi: Some(alibi(&per_sequence, AlibiLayout::PerBatchAndHead)),
        ..Scoring::plain(scale as f64, false)
    };
    ok &= reference_check(
        "flash_attn_alibi_windowed(128, 0), slopes [batch, heads_q]",
        &alibi_output,
        &scoring,
    )?;

    // ALiBi on the serving calls, slopes per sequence and head, each against candle's f32
    // attention with the same biases. The decode step above against its KV cache:
    let decoded = flash_attn_kv_cache_alibi(
        &q_step,
        &k_cache,
        &v_cache,
        &cache_lens,
        &slopes_2d,
        &options,
    )?;
    // The same keys in pages of 16, the pages shuffled (page g of the caches, sequence-major,
    // at 37 g mod 128).
    let page_size = 16;
    let pages = shape.batch * cache_slots / page_size;
    let shuffled = |page: usize| (37 * page) % pages;
    let page_of_slot: Vec<u32> = (0..pages)
        .map(|slot| (0..pages).find(|&page| shuffled(page) == slot).unwrap() as u32)
        .collect();
    let page_of_slot = Tensor::new(&page_of_slot[..], &device)?;
    let to_pages = |cache: &Tensor| {
        cache
            .reshape((pages, page_size, 8, 128))?
            .index_select(&page_of_slot, 0)
    };
    let (k_pages, v_pages) = (to_pages(&k_cache)?, to_pages(&v_cache)?);
    let pages_per_sequence = cache_slots / page_size;
    let block_table: Vec<u32> = (0..pages).map(|page| shuffled(page) as u32).collect();
    let block_table = Tensor::from_vec(block_table, (shape.batch, pages_per_sequence), &device)?;
    let paged = flash_attn_paged_kv_cache_alibi(
        &q_step,
        &k_pages,
        &v_pages,
        &block_table,
        &cache_lens,
        &slopes_2d,
        &options,
    )?;
    for (sequence, &length) in used.iter().enumerate() {
        let length = length as usize;
        let slopes = &per_sequence[sequence * shape.heads_q..(sequence + 1) * shape.heads_q];
        let [q_used, k_used, v_used] = used_cache(sequence, length)?;
        let expected =
            candle_attention_alibi(&q_used, &k_used, &v_used, scale, Mask::Causal, Some(slopes))?;
        for (call, output) in [
            ("flash_attn_kv_cache_alibi", &decoded),
            ("flash_attn_paged_kv_cache_alibi (pages of 16)", &paged),
        ] {
            let what = format!("{call}, sequence {sequence} ({length} keys used)");
            ok &= compare(&what, &output.i(sequence..sequence + 1)?, &expected, 2e-2)?;
        }
    }
    // A variable-length batch: the first 300 tokens of sequence 0 and 212 of sequence 1.
    let lengths = [300usize, 212];
    let packed = |tensor: &Tensor| -> candle_core::Result<Tensor> {
        let parts = lengths
            .iter()
            .enumerate()
            .map(|(sequence, &length)| tensor.i(sequence)?.narrow(0, 0, length))
            .collect::<candle_core::Result<Vec<_>>>()?;
        Tensor::cat(&parts, 0)
    };
    let cu_seqlens = [0, lengths[0] as u32, (lengths[0] + lengths[1]) as u32];
    let varlen = flash_attn_varlen_alibi(
        &packed(&q)?,
        &packed(&k)?,
        &packed(&v)?,
        &cu_seqlens,
        &cu_seqlens,
        &slopes_2d,
        &options,
    )?;
    for (sequence, &length) in lengths.iter().enumerate() {
        let slopes = &per_sequence[sequence * shape.heads_q..(sequence + 1) * shape.heads_q];
        let narrow = |tensor: &Tensor| tensor.i(sequence..sequence + 1)?.narrow(1, 0, length);
        let expected = candle_attention_alibi(
            &narrow(&q)?,
            &narrow(&k)?,
            &narrow(&v)?,
            scale,
            Mask::Causal,
            Some(slopes),
        )?;
        let ours = varlen
            .narrow(0, cu_seqlens[sequence] as usize, length)?
            .unsqueeze(0)?;
        let what = format!("flash_attn_varlen_alibi, sequence {sequence} ({length} tokens)");
        ok &= compare(&what, &ours, &expected, 2e-2)?;
    }

    // The errors: a CPU tensor, an f32 tensor, f16 slopes.
    let on_cpu = q.to_device(&Device::Cpu)?;
    match flash_attn(&on_cpu, &k, &v, scale, true) {
        Err(error) => println!("a CPU q: {}", first_line(&error)),
        Ok(_) => {
            println!("a CPU q was accepted: WRONG");
            ok = false;
        }
    }
    match flash_attn(&q.to_dtype(DType::F32)?, &k, &v, scale, true) {
        Err(error) => println!("an f32 q: {}", first_line(&error)),
        Ok(_) => {
            println!("an f32 q was accepted: WRONG");
            ok = false;
        }
    }

    match flash_attn_alibi(&q, &k, &v, &slopes.to_dtype(DType::F16)?, scale, true) {
        Err(error) => println!("f16 ALiBi slopes: {}", first_line(&error)),
        Ok(_) => {
            println!("f16 ALiBi slopes were accepted: WRONG");
            ok = false;
        }
    }

    if !ok {
        std::process::exit(1);
    }
    println!("all results within tolerance");
    Ok(())
}

/// Prints the error of `output` (`[batch, seq_q, heads_q, head_dim]` bf16) against flash-attn's
/// f64 CPU reference under `scoring`, beside that of a plain bf16 implementation, and whether
/// it is within tolerance ([`within_tolerance`]). The reference's inputs are `[batch, heads,
/// seq, head_dim]`.
fn check_against_reference(
    what: &str,
    output: &Tensor,
    scoring: &Scoring,
    shape: AttentionShape,
    (q, k, v): (&[bf16], &[bf16], &[bf16]),
) -> candle_core::Result<bool> {
    let exact = reference::attention_with(q, k, v, shape, scoring, Precision::F64);
    let plain = reference::attention_with(q, k, v, shape, scoring, Precision::Plain(Dtype::Bf16));
    let output: Vec<bf16> = output.flatten_all()?.to_vec1()?;
    let dims = (shape.batch, shape.heads_q, shape.seq_len_q, shape.head_dim);
    let output = reference::relayout(&output, dims, Layout::Bshd, Layout::Bhsd);
    let ours = error_stats(output.iter().map(|x| x.to_f64()), &exact.output);
    let plain = error_stats(plain.output.iter().copied(), &exact.output);
    let within = within_tolerance(&ours, &plain);
    println!(
        "{what}: max {:.2e}, mean {:.2e} (a plain bf16 implementation: max {:.2e}, mean \
         {:.2e}): {}",
        ours.max_abs,
        ours.mean_abs,
        plain.max_abs,
        plain.mean_abs,
        verdict(within)
    );
    Ok(within)
}

/// A candle error's message without the backtrace candle appends where `RUST_BACKTRACE` is set.
fn first_line(error: &candle_core::Error) -> String {
    error
        .to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "within tolerance"
    } else {
        "BEYOND TOLERANCE"
    }
}

/// Prints the largest difference between two tensors of one shape and whether it is at most
/// `tolerance`.
fn compare(
    what: &str,
    ours: &Tensor,
    expected: &Tensor,
    tolerance: f32,
) -> candle_core::Result<bool> {
    let difference = (ours.to_dtype(DType::F32)? - expected.to_dtype(DType::F32)?)?
        .abs()?
        .flatten_all()?
        .max(0)?
        .to_scalar::<f32>()?;
    let ok = difference <= tolerance;
    println!(
        "{what}: max difference {difference:.2e} (tolerance {tolerance:.0e}): {}",
        verdict(ok)
    );
    Ok(ok)
}

/// Which keys each query sees in [`candle_attention`], aligned to the bottom right as
/// flash-attn's masks are.
#[derive(Clone, Copy)]
enum Mask {
    Causal,
    /// Causal, and at most this many keys before the diagonal.
    Window(usize),
}

/// `softmax(q kᵀ · scale) v` by candle's ops in f32: `[b, s, h, d]` in and out, K and V heads
/// repeated for GQA.
fn candle_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: f32,
    mask: Mask,
) -> candle_core::Result<Tensor> {
    candle_attention_alibi(q, k, v, scale, mask, None)
}

/// [`candle_attention`] with ALiBi biases where `alibi_slopes` (one per query head) are given:
/// `-slope * |i + seq_kv - seq_q - j|` added to the scaled score of query `i` and key `j`.
fn candle_attention_alibi(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: f32,
    mask: Mask,
    alibi_slopes: Option<&[f32]>,
) -> candle_core::Result<Tensor> {
    let (_, seq_q, heads_q, _) = q.dims4()?;
    let (_, seq_kv, heads_kv, _) = k.dims4()?;
    let q = q.to_dtype(DType::F32)?.transpose(1, 2)?.contiguous()?;
    let k = repeat_heads(&k.to_dtype(DType::F32)?, heads_q / heads_kv)?;
    let v = repeat_heads(&v.to_dtype(DType::F32)?, heads_q / heads_kv)?;
    let scores = (q.matmul(&k.t()?.contiguous()?)? * scale as f64)?;
    let offset = seq_kv as i64 - seq_q as i64;
    let no_bias = vec![0.0; heads_q];
    let slopes = alibi_slopes.unwrap_or(&no_bias);
    let bias: Vec<f32> = slopes
        .iter()
        .flat_map(|&slope| {
            (0..seq_q as i64).flat_map(move |i| {
                (0..seq_kv as i64).map(move |j| {
                    let diagonal = i + offset;
                    let visible = match mask {
                        Mask::Causal => j <= diagonal,
                        Mask::Window(left) => j <= diagonal && j >= diagonal - left as i64,
                    };
                    if visible {
                        -slope * (diagonal - j).abs() as f32
                    } else {
                        f32::NEG_INFINITY
                    }
                })
            })
        })
        .collect();
    let bias = Tensor::from_vec(bias, (heads_q, seq_q, seq_kv), q.device())?;
    let scores = scores.broadcast_add(&bias)?;
    let max = scores.max_keepdim(D::Minus1)?;
    let weights = scores.broadcast_sub(&max)?.exp()?;
    let weights = weights.broadcast_div(&weights.sum_keepdim(D::Minus1)?)?;
    weights.matmul(&v)?.transpose(1, 2)?.contiguous()
}

/// `[b, s, h_kv, d]` to `[b, h_kv * groups, s, d]`, each K/V head repeated for its `groups`
/// query heads.
fn repeat_heads(tensor: &Tensor, groups: usize) -> candle_core::Result<Tensor> {
    let (batch, seq, heads, head_dim) = tensor.dims4()?;
    tensor
        .transpose(1, 2)?
        .unsqueeze(2)?
        .expand((batch, heads, groups, seq, head_dim))?
        .reshape((batch, heads * groups, seq, head_dim))
}

/// The attention a candle program without flash-attn runs: bf16 matmuls (cuBLAS), the causal
/// mask and the softmax in f32. For the timing only.
fn candle_attention_bf16(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: f32,
) -> candle_core::Result<Tensor> {
    let (_, seq_q, heads_q, _) = q.dims4()?;
    let (_, seq_kv, heads_kv, _) = k.dims4()?;
    let q = q.transpose(1, 2)?.contiguous()?;
    let k = repeat_heads(k, heads_q / heads_kv)?;
    let v = repeat_heads(v, heads_q / heads_kv)?;
    let scores = (q.matmul(&k.t()?.contiguous()?)?.to_dtype(DType::F32)? * scale as f64)?;
    let mask: Vec<u8> = (0..seq_q)
        .flat_map(|i| (0..seq_kv).map(move |j| u8::from(j + seq_q > i + seq_kv)))
        .collect();
    let mask = Tensor::from_vec(mask, (seq_q, seq_kv), q.device())?.broadcast_as(scores.shape())?;
    let scores = mask.where_cond(
        &Tensor::new(f32::NEG_INFINITY, q.device())?.broadcast_as(scores.shape())?,
        &scores,
    )?;
    let max = scores.max_keepdim(D::Minus1)?;
    let weights = scores.broadcast_sub(&max)?.exp()?;
    let weights = weights.broadcast_div(&weights.sum_keepdim(D::Minus1)?)?;
    weights
        .to_dtype(DType::BF16)?
        .matmul(&v.contiguous()?)?
        .transpose(1, 2)?
        .contiguous()
}
