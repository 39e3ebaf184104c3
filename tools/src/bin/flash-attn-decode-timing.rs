//! Times decode against a KV cache (`forward_kv_cache`) with CUDA events around back-to-back
//! launches, at the serving issue's shapes (fp16 and bf16, D=128 or the head dim of
//! `--head-dim`, one query row, 32 query heads over 8 K/V heads, full contiguous caches):
//! median and spread, and the K+V read rate; the same problems in paged caches
//! (`forward_paged_kv_cache`, pages of 16, 64 and 256 keys in a shuffled block table) against
//! the contiguous time; fp16 decode with a softcap, a sliding window of 4,096 keys, both, ALiBi
//! (BLOOM's slopes, through `forward_kv_cache_alibi`, whose time includes the slopes' upload)
//! and ALiBi with the window (the modified serving kernels) against the plain time. Then a
//! variable-length prefill (`forward_varlen`): 16 sequences of lengths spread between 128 and
//! 4096 (fixed seed), fp16, the same head dim, 32 query heads over 8, causal and not, against
//! the dense kernel (`forward`) on a batch of 16 sequences of the mean length. Then chunked
//! prefill: causal chunks of new queries against full contiguous caches (`forward_kv_cache`,
//! [`CHUNKED_PREFILL_SHAPES`]) and a ragged batch of chunks (`forward_varlen_kv_cache`), fp16,
//! the same heads and head dim, each on the default kernel, on the sm80 family's (what
//! [`plan_kv_cache`] runs, with its splits) and on each sm90 serving kernel unsplit (compute
//! capability 9.0), against the dense kernel on the same problem; the full caches also in
//! shuffled pages (`forward_paged_kv_cache`, pages of 16 and 256 keys) on the default kernel,
//! the sm80 family's and each other sm90 paged kernel unsplit.
//!
//! `flash-attn-decode-timing [--head-dim D] [--splits N,N,...] [--varlen-json PATH]
//! [--varlen-only] [--chunked-json PATH] [--chunked-only] [--decode-only]`: one line
//! per case: median, p10-p90, K+V read rate, splits; for the prefill, median, p10-p90 and
//! TFLOP/s counting real work only (each sequence's `4 · H · Sq · Sk · D`, halved for causal).
//! With `--splits`, each fp16 decode shape again at each of those split counts
//! (`ForwardOptions::num_splits`), contiguous and in pages of 16: the data behind the split
//! heuristic. With `--varlen-json`, the prefill batch (its offsets and lengths) and its timings
//! also go to PATH as JSON, for `scripts/varlen_peers.py`, which times PyTorch's varlen peers
//! on the same batch; with `--chunked-json`, the chunked prefills' problems and timings, for
//! `scripts/chunked_peers.py`. `--varlen-only`, `--chunked-only` and `--decode-only` time that
//! section alone.

use cust::memory::DeviceBuffer;
use flash_attn::reference::random_normal;
use flash_attn::{
    plan_kv_cache, plan_kv_cache_alibi, plan_kv_cache_on, plan_on, plan_paged_kv_cache,
    plan_paged_kv_cache_on, plan_varlen, plan_varlen_kv_cache, plan_varlen_kv_cache_on,
    plan_varlen_on, AlibiLayout, AlibiSlopes, AttentionShape, Element, Error, Family,
    FlashAttention, ForwardKernel, ForwardOptions, Layout, SlidingWindow, Variant,
    VarlenCacheShape, VarlenShape, FORWARD_KERNELS,
};
use flash_attn_tools::timing::{
    chunk_flops, decode_shape, rounded, shuffled_pages, time_launches, varlen_prefill_offsets,
    DECODE_HEAD_DIM, DECODE_SHAPES, PAGE_SIZES,
};
use half::{bf16, f16};
use serde_json::{json, Value};

/// The device buffers of a decode problem: random Q, K and V (mean 0.5), full contiguous
/// caches (every sequence's length its capacity) and the output.
struct DecodeBuffers<T: Element> {
    q: DeviceBuffer<T>,
    k: DeviceBuffer<T>,
    v: DeviceBuffer<T>,
    lens: DeviceBuffer<u32>,
    output: DeviceBuffer<T>,
}

impl<T: Element> DecodeBuffers<T> {
    fn new(shape: &AttentionShape) -> Result<Self, Error> {
        let kv = shape.kv_elements()?;
        Ok(Self {
            q: DeviceBuffer::from_slice(&random_normal::<T>(shape.q_elements()?, 0.5, 1.0, 1))?,
            k: DeviceBuffer::from_slice(&random_normal::<T>(kv, 0.5, 1.0, 2))?,
            v: DeviceBuffer::from_slice(&random_normal::<T>(kv, 0.5, 1.0, 3))?,
            lens: DeviceBuffer::from_slice(&vec![shape.seq_len_kv as u32; shape.batch])?,
            output: DeviceBuffer::from_slice(&vec![T::from_f64(0.0); shape.q_elements()?])?,
        })
    }
}

/// Times decode at every shape of [`DECODE_SHAPES`], with `num_splits` (`None`: the planner's
/// count) and each page size; `against` holds the contiguous medians of an earlier call with
/// `num_splits` `None` (empty on that call), which a split sweep's lines compare with.
fn time<T: Element>(
    gpu: &FlashAttention,
    head_dim: usize,
    name: &str,
    num_splits: Option<usize>,
    page_sizes: &[usize],
    against: &mut Vec<f64>,
) -> Result<(), Error> {
    for (shape_index, (batch, length)) in DECODE_SHAPES.into_iter().enumerate() {
        let shape = decode_shape(batch, length, head_dim);
        let options = ForwardOptions {
            layout: Layout::Bshd,
            num_splits,
            ..ForwardOptions::default()
        };
        let plan = plan_kv_cache(T::DTYPE, &shape, &options, gpu.sm_count())?;
        let kv = shape.kv_elements()?;
        let DecodeBuffers {
            q,
            k,
            v,
            lens,
            mut output,
        } = DecodeBuffers::<T>::new(&shape)?;
        let times = time_launches(gpu.stream(), 50, 30, 100, || {
            gpu.forward_kv_cache(&q, &k, &v, &lens, &mut output, None, shape, &options)
        })?;
        let median = times.median();
        let bytes = 2.0 * kv as f64 * 2.0;
        let versus_default = match against.get(shape_index) {
            Some(default) => format!(", {:.3}x the default split's time", median / default),
            None => {
                against.push(median);
                String::new()
            }
        };
        println!(
            "{name} B={batch} L={length}: {median:.1} us (p10-p90 {:.1}-{:.1}), K+V {:.2} TB/s, \
             {} splits, host {:.1} us/launch{versus_default}",
            times.quantile(0.1),
            times.quantile(0.9),
            bytes / (median * 1e-6) / 1e12,
            plan.splits(),
            times.host_us_per_launch
        );
        // The same problem in a paged cache: the same keys, scattered over pages in a random
        // order (a permutation per page size), against the contiguous median above.
        for &page_size in page_sizes {
            let (paged, table) = shuffled_pages(batch, length, page_size);
            let table = DeviceBuffer::from_slice(&table)?;
            // The pages hold other values than the contiguous cache: the timing does not
            // depend on them.
            let times = time_launches(gpu.stream(), 50, 30, 100, || {
                gpu.forward_paged_kv_cache(
                    &q,
                    &k,
                    &v,
                    &table,
                    &lens,
                    &mut output,
                    None,
                    shape,
                    &paged,
                    &options,
                )
            })?;
            let paged_median = times.median();
            println!(
                "{name} B={batch} L={length} paged {page_size}: {paged_median:.1} us (p10-p90 \
                 {:.1}-{:.1}), K+V {:.2} TB/s, {:.3}x the contiguous cache's time",
                times.quantile(0.1),
                times.quantile(0.9),
                bytes / (paged_median * 1e-6) / 1e12,
                paged_median / median
            );
        }
    }
    Ok(())
}

/// Times fp16 decode at every shape of [`DECODE_SHAPES`] with the score modifiers (the
/// modified serving kernels): a softcap of 30 (Gemma 2's), a sliding window of 4,096 keys
/// (Mistral's), both, ALiBi (BLOOM's slopes; its query heads are not packed into one block's
/// rows) and ALiBi with the window, against `plain`, the plain kernels' contiguous medians. A
/// window's time should scale with the keys it leaves (`min(1, 4096 / L)` of them).
fn time_modified_decode(gpu: &FlashAttention, head_dim: usize, plain: &[f64]) -> Result<(), Error> {
    let window = Some(SlidingWindow {
        left: Some(4095),
        right: Some(0),
    });
    // (label, window, softcap, ALiBi)
    let cases = [
        ("softcap 30", None, Some(30.0), false),
        ("window 4096", window, None, false),
        ("window 4096 + softcap 30", window, Some(30.0), false),
        ("alibi", None, None, true),
        ("alibi + window 4096", window, None, true),
    ];
    for (shape_index, (batch, length)) in DECODE_SHAPES.into_iter().enumerate() {
        let shape = decode_shape(batch, length, head_dim);
        let DecodeBuffers {
            q,
            k,
            v,
            lens,
            mut output,
        } = DecodeBuffers::<f16>::new(&shape)?;
        // BLOOM's slopes, 2^(-8 (h + 1) / heads).
        let slopes: Vec<f32> = (0..shape.heads_q)
            .map(|h| 2f32.powf(-8.0 * (h + 1) as f32 / shape.heads_q as f32))
            .collect();
        let alibi = AlibiSlopes {
            slopes: &slopes,
            layout: AlibiLayout::PerHead,
        };
        for (label, window, softcap, with_alibi) in cases {
            let options = ForwardOptions {
                layout: Layout::Bshd,
                window,
                softcap,
                ..ForwardOptions::default()
            };
            let plan = if with_alibi {
                plan_kv_cache_alibi(f16::DTYPE, &shape, &options, alibi.layout, gpu.sm_count())?
            } else {
                plan_kv_cache(f16::DTYPE, &shape, &options, gpu.sm_count())?
            };
            let times = time_launches(gpu.stream(), 50, 30, 100, || {
                let output = &mut output;
                if with_alibi {
                    gpu.forward_kv_cache_alibi(
                        &q, &k, &v, &lens, output, None, alibi, shape, &options,
                    )
                } else {
                    gpu.forward_kv_cache(&q, &k, &v, &lens, output, None, shape, &options)
                }
            })?;
            let median = times.median();
            let visible = window.map_or(1.0, |_| (4096.0 / length as f64).min(1.0));
            println!(
                "f16 B={batch} L={length} {label}: {median:.1} us (p10-p90 {:.1}-{:.1}), {:.3}x \
                 the plain kernel's time, {:.3}x it scaled by the visible keys ({visible:.3}), \
                 {} splits, kernel {}",
                times.quantile(0.1),
                times.quantile(0.9),
                median / plain[shape_index],
                median / (plain[shape_index] * visible),
                plan.splits(),
                plan.kernel().entry
            );
        }
    }
    Ok(())
}

fn main() -> Result<(), Error> {
    let args = arguments();
    let gpu = FlashAttention::new()?;
    println!(
        "decode timing on {} ({} SMs)",
        gpu.device_name(),
        gpu.sm_count()
    );
    let head_dim = args.head_dim;
    println!("head dim {head_dim}");
    let mut f16_medians = Vec::new();
    // The sections the `--*-only` flags name, or all three.
    let sections = (args.decode_only, args.varlen_only, args.chunked_only);
    let (decode, varlen, chunked) = if sections == (false, false, false) {
        (true, true, true)
    } else {
        sections
    };
    if decode {
        time::<f16>(&gpu, head_dim, "f16", None, &PAGE_SIZES, &mut f16_medians)?;
        time::<bf16>(&gpu, head_dim, "bf16", None, &PAGE_SIZES, &mut Vec::new())?;
        time_modified_decode(&gpu, head_dim, &f16_medians)?;
    }
    let write_json = |path: &Option<String>, doc: &Value| {
        if let Some(path) = path {
            let text = serde_json::to_string_pretty(doc).expect("plain data serialises");
            std::fs::write(path, text + "\n").expect("writing the JSON");
            println!("wrote {path}");
        }
    };
    if varlen {
        write_json(&args.varlen_json, &time_varlen_prefill(&gpu, head_dim)?);
    }
    if chunked {
        write_json(&args.chunked_json, &time_chunked_prefill(&gpu, head_dim)?);
    }
    for splits in args.splits {
        let name = format!("f16 num_splits={splits}");
        time::<f16>(&gpu, head_dim, &name, Some(splits), &[16], &mut f16_medians)?;
    }
    Ok(())
}

/// The command line: the head dim of `--head-dim` ([`DECODE_HEAD_DIM`] without it), the split
/// counts of `--splits N,N,...` (none without it), the paths of `--varlen-json` and
/// `--chunked-json`, `--varlen-only` and `--chunked-only` (those sections alone, no decode
/// timing) and `--decode-only` (the decode timing alone).
struct Arguments {
    head_dim: usize,
    splits: Vec<usize>,
    varlen_json: Option<String>,
    chunked_json: Option<String>,
    varlen_only: bool,
    chunked_only: bool,
    decode_only: bool,
}

/// Parses the command line; exits with a usage line on anything it does not know.
fn arguments() -> Arguments {
    let usage = || -> ! {
        eprintln!(
            "usage: flash-attn-decode-timing [--head-dim D] [--splits N,N,...] [--varlen-json PATH] \
             [--varlen-only] [--chunked-json PATH] [--chunked-only] [--decode-only]"
        );
        std::process::exit(2)
    };
    let mut parsed = Arguments {
        head_dim: DECODE_HEAD_DIM,
        splits: Vec::new(),
        varlen_json: None,
        chunked_json: None,
        varlen_only: false,
        chunked_only: false,
        decode_only: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--varlen-only" {
            parsed.varlen_only = true;
            continue;
        }
        if flag == "--chunked-only" {
            parsed.chunked_only = true;
            continue;
        }
        if flag == "--decode-only" {
            parsed.decode_only = true;
            continue;
        }
        let value = args.next().unwrap_or_else(|| usage());
        match flag.as_str() {
            "--head-dim" => parsed.head_dim = value.parse().unwrap_or_else(|_| usage()),
            "--splits" => {
                parsed.splits = value
                    .split(',')
                    .map(|count| count.parse::<usize>().ok())
                    .collect::<Option<Vec<_>>>()
                    .unwrap_or_else(|| usage())
            }
            "--varlen-json" => parsed.varlen_json = Some(value),
            "--chunked-json" => parsed.chunked_json = Some(value),
            _ => usage(),
        }
    }
    parsed
}

/// Warm-up launches, repeats and launches per repeat of the prefill timings (a launch takes
/// 3-6 ms on an H100); `scripts/varlen_peers.py` reads them from the JSON and times the peers
/// the same way.
const PREFILL_TIMING: (usize, usize, usize) = (3, 10, 5);

/// Times `forward_varlen` on the ragged prefill (queries and keys of the same length per
/// sequence) and `forward` on the dense batch of the mean length, fp16, GQA 32/8, at head dim
/// `head_dim`; returns the batch and the timings as the JSON of `--varlen-json`.
fn time_varlen_prefill(gpu: &FlashAttention, head_dim: usize) -> Result<Value, Error> {
    let (heads_q, heads_kv) = (32, 8);
    let (warmup, repeats, launches) = PREFILL_TIMING;
    let cu_seqlens = varlen_prefill_offsets();
    let sequences = cu_seqlens.len() - 1;
    let lengths: Vec<u32> = cu_seqlens
        .windows(2)
        .map(|pair| pair[1] - pair[0])
        .collect();
    let tokens = cu_seqlens[sequences] as usize;
    let mean = tokens.div_ceil(sequences);
    println!("varlen prefill: {sequences} sequences of {lengths:?} tokens ({tokens} in all, mean {mean})");
    let shape = VarlenShape {
        cu_seqlens_q: &cu_seqlens,
        cu_seqlens_kv: &cu_seqlens,
        heads_q,
        heads_kv,
        head_dim,
    };
    let dense = AttentionShape {
        batch: sequences,
        heads_q,
        heads_kv,
        seq_len_q: mean,
        seq_len_kv: mean,
        head_dim,
    };
    // One set of buffers, large enough for both (the dense batch has at most 15 more tokens).
    let q_elements = dense.q_elements()?.max(tokens * heads_q * head_dim);
    let kv_elements = dense.kv_elements()?.max(tokens * heads_kv * head_dim);
    let q = DeviceBuffer::from_slice(&random_normal::<f16>(q_elements, 0.5, 1.0, 1))?;
    let k = DeviceBuffer::from_slice(&random_normal::<f16>(kv_elements, 0.5, 1.0, 2))?;
    let v = DeviceBuffer::from_slice(&random_normal::<f16>(kv_elements, 0.5, 1.0, 3))?;
    let mut output = DeviceBuffer::from_slice(&vec![f16::from_f64(0.0); q_elements])?;
    let mut results = Vec::new();
    for causal in [false, true] {
        let options = ForwardOptions {
            causal,
            layout: Layout::Bshd,
            ..ForwardOptions::default()
        };
        let extents = shape.extents()?;
        let capability = gpu.compute_capability();
        let varlen_plan =
            plan_varlen_on(f16::DTYPE, &extents, &options, gpu.sm_count(), capability)?;
        // On compute capability 9.0 the sm90 family's serving kernel runs; the head dim's
        // other sm90 serving tiles ("varlen-other-sm90") and the sm80 family's kernel, which
        // runs everywhere else ("varlen-sm80"), are timed beside it.
        let sm80_kernel = plan_varlen(f16::DTYPE, &extents, &options, gpu.sm_count())?.kernel();
        let mut kernels = vec![("varlen", varlen_plan.kernel(), None)];
        if sm80_kernel != varlen_plan.kernel() {
            let other_sm90 = sm90_kernels(Variant::Serving, head_dim, capability)
                .filter(|&kernel| kernel != varlen_plan.kernel());
            kernels.extend(other_sm90.map(|kernel| ("varlen-other-sm90", kernel, Some(kernel))));
            kernels.push(("varlen-sm80", sm80_kernel, Some(sm80_kernel)));
        }
        for (problem, kernel, named) in kernels {
            let options = ForwardOptions {
                kernel: named,
                ..options
            };
            let varlen = time_launches(gpu.stream(), warmup, repeats, launches, || {
                gpu.forward_varlen(&q, &k, &v, &mut output, None, &shape, &options)
            })?;
            let mut case = report(
                &format!("H=32/8 {problem} causal={causal}"),
                &varlen,
                shape.flops(causal),
                kernel.entry,
            );
            case["problem"] = json!(problem);
            case["causal"] = json!(causal);
            results.push(case);
        }
        let dense_plan = plan_on(f16::DTYPE, &dense, &options, gpu.sm_count(), capability)?;
        let dense_times = time_launches(gpu.stream(), warmup, repeats, launches, || {
            gpu.forward(&q, &k, &v, &mut output, None, dense, &options)
        })?;
        let mut case = report(
            &format!("H=32/8 dense B={sequences} S={mean} causal={causal}"),
            &dense_times,
            dense.flops(causal),
            dense_plan.kernel().entry,
        );
        case["problem"] = json!("dense");
        case["causal"] = json!(causal);
        case["batch"] = json!(sequences);
        case["seq_len"] = json!(mean);
        results.push(case);
    }
    Ok(json!({
        "device": gpu.device_name(),
        "dtype": f16::DTYPE.name(),
        "layout": "bshd",
        "heads_q": heads_q,
        "heads_kv": heads_kv,
        "head_dim": head_dim,
        "cu_seqlens": cu_seqlens,
        "lengths": lengths,
        "tokens": tokens,
        "mean_length": mean,
        "flop_count": "4 * heads_q * sum(len_q * len_kv) * head_dim, halved when causal",
        "warmup": warmup,
        "repeats": repeats,
        "launches_per_repeat": launches,
        "results": results,
    }))
}

/// The chunked prefills `(batch, K/V heads, queries per sequence, cache length)` of
/// [`time_chunked_prefill`] (32 query heads): each sequence's new chunk against a full cache of
/// that many keys (the chunk's own keys included), causal; the last a decode step of
/// multi-head attention, whose one query row per sequence packs no heads.
const CHUNKED_PREFILL_SHAPES: [(usize, usize, usize, usize); 6] = [
    (1, 8, 512, 4096),
    (1, 8, 2048, 8192),
    (4, 8, 512, 4096),
    (4, 8, 2048, 8192),
    (16, 8, 256, 4096),
    (16, 32, 1, 1024),
];

/// The ragged chunked prefill of [`time_chunked_prefill`]: `(queries, used keys)` per sequence,
/// in caches of [`RAGGED_CACHE_CAPACITY`] keys.
const RAGGED_CHUNKS: [(u32, u32); 8] = [
    (512, 4096),
    (128, 700),
    (1024, 8192),
    (300, 2300),
    (2048, 2048),
    (64, 6000),
    (777, 5000),
    (1500, 3100),
];
const RAGGED_CACHE_CAPACITY: usize = 8192;

/// The page sizes of [`time_chunked_prefill`]'s paged caches: vLLM's default (16 keys, shorter
/// than every key block, a page lookup per row) and FlashAttention-2's required 256 (one per
/// tile).
const CHUNKED_PAGE_SIZES: [usize; 2] = [16, 256];

/// Times causal chunked prefill, fp16, GQA 32/8, at head dim `head_dim`: `forward_kv_cache` at
/// each of [`CHUNKED_PREFILL_SHAPES`] (full caches) and `forward_varlen_kv_cache` on
/// [`RAGGED_CHUNKS`], each on the default kernel ([`plan_kv_cache_on`]), on the sm80 family's
/// ([`plan_kv_cache`]'s, with its splits) and on each sm90 serving kernel with one split
/// (compute capability 9.0); the full caches also in pages of [`CHUNKED_PAGE_SIZES`]
/// (`forward_paged_kv_cache` on the default kernel, the sm80 family's and each other sm90 paged
/// kernel with one split) and against `forward`
/// on the same problem (the dense kernel). Returns the problems and timings as the JSON of
/// `--chunked-json`.
fn time_chunked_prefill(gpu: &FlashAttention, head_dim: usize) -> Result<Value, Error> {
    let (heads_q, ragged_heads_kv) = (32, 8);
    let (warmup, repeats, launches) = PREFILL_TIMING;
    let capability = gpu.compute_capability();
    let sm90_serving: Vec<_> = sm90_kernels(Variant::Serving, head_dim, capability).collect();
    let sm90_paged: Vec<_> = sm90_kernels(Variant::Paged, head_dim, capability).collect();
    let largest = |queries: usize, keys: usize| (queries * heads_q * head_dim, keys);
    let (q_elements, kv_rows) = CHUNKED_PREFILL_SHAPES
        .iter()
        .map(|&(batch, heads_kv, chunk, cache)| largest(batch * chunk, batch * cache * heads_kv))
        .chain([largest(
            RAGGED_CHUNKS.iter().map(|&(q, _)| q as usize).sum(),
            RAGGED_CHUNKS.len() * RAGGED_CACHE_CAPACITY * ragged_heads_kv,
        )])
        .fold((0, 0), |(q, kv), (q2, kv2)| (q.max(q2), kv.max(kv2)));
    let kv_elements = kv_rows * head_dim;
    let q = DeviceBuffer::from_slice(&random_normal::<f16>(q_elements, 0.5, 1.0, 1))?;
    let k = DeviceBuffer::from_slice(&random_normal::<f16>(kv_elements, 0.5, 1.0, 2))?;
    let v = DeviceBuffer::from_slice(&random_normal::<f16>(kv_elements, 0.5, 1.0, 3))?;
    let mut output = DeviceBuffer::from_slice(&vec![f16::from_f64(0.0); q_elements])?;
    let options = ForwardOptions {
        causal: true,
        layout: Layout::Bshd,
        ..ForwardOptions::default()
    };
    let sm = gpu.sm_count();
    // The options that name `kernel` and `num_splits`.
    let named = |kernel, num_splits| ForwardOptions {
        kernel: Some(kernel),
        num_splits,
        ..options
    };
    // The kernels to time on one problem: the default's, the sm80 family's with its own split
    // count, each sm90 serving kernel with one split; `(name, kernel, options)`.
    let cases = |default: &'static ForwardKernel, sm80: &'static ForwardKernel| {
        let mut cases = vec![("default", default, options)];
        if sm80 != default {
            cases.push(("sm80", sm80, named(sm80, None)));
        }
        for &kernel in sm90_serving.iter().filter(|&&kernel| kernel != default) {
            cases.push(("sm90-unsplit", kernel, named(kernel, Some(1))));
        }
        cases
    };
    let mut results = Vec::new();
    for (batch, heads_kv, chunk, cache) in CHUNKED_PREFILL_SHAPES {
        let shape = AttentionShape {
            batch,
            heads_q,
            heads_kv,
            seq_len_q: chunk,
            seq_len_kv: cache,
            head_dim,
        };
        let lens = DeviceBuffer::from_slice(&vec![cache as u32; batch])?;
        let flops = (batch * heads_q) as f64 * chunk_flops(chunk as u32, cache as u32, head_dim);
        let default = plan_kv_cache_on(f16::DTYPE, &shape, &options, sm, capability)?;
        let sm80 = plan_kv_cache(f16::DTYPE, &shape, &options, sm)?.kernel();
        for (problem, kernel, options) in cases(default.kernel(), sm80) {
            let splits = plan_kv_cache_on(f16::DTYPE, &shape, &options, sm, capability)?.splits();
            let times = time_launches(gpu.stream(), warmup, repeats, launches, || {
                gpu.forward_kv_cache(&q, &k, &v, &lens, &mut output, None, shape, &options)
            })?;
            let name = format!(
                "H=32/{heads_kv} chunked B={batch} Sq={chunk} Sk={cache} {problem} splits={splits}"
            );
            let mut case = report(&name, &times, flops, kernel.entry);
            case["problem"] = json!(problem);
            case["splits"] = json!(splits);
            case["chunks"] = json!(vec![[chunk, cache]; batch]);
            case["heads_kv"] = json!(heads_kv);
            results.push(case);
        }
        // The same chunks over paged caches (the keys in shuffled pages): the default kernel
        // (on Hopper the sm90 paged kernel where it takes the call), the sm80 family's and
        // each other sm90 paged kernel with one split.
        for page_size in CHUNKED_PAGE_SIZES {
            let (paged, table) = shuffled_pages(batch, cache, page_size);
            let table = DeviceBuffer::from_slice(&table)?;
            let plan = |options: &ForwardOptions| {
                plan_paged_kv_cache_on(f16::DTYPE, &shape, &paged, options, sm, capability)
            };
            let default = plan(&options)?.kernel();
            let sm80 = plan_paged_kv_cache(f16::DTYPE, &shape, &paged, &options, sm)?.kernel();
            let mut paged_cases = vec![("default", default, options)];
            if sm80 != default {
                paged_cases.push(("sm80", sm80, named(sm80, None)));
            }
            for &kernel in sm90_paged.iter().filter(|&&kernel| kernel != default) {
                paged_cases.push(("sm90-unsplit", kernel, named(kernel, Some(1))));
            }
            for (problem, kernel, options) in paged_cases {
                let splits = plan(&options)?.splits();
                let times = time_launches(gpu.stream(), warmup, repeats, launches, || {
                    gpu.forward_paged_kv_cache(
                        &q,
                        &k,
                        &v,
                        &table,
                        &lens,
                        &mut output,
                        None,
                        shape,
                        &paged,
                        &options,
                    )
                })?;
                let problem = format!("paged-{page_size}-{problem}");
                let name = format!(
                    "H=32/{heads_kv} chunked B={batch} Sq={chunk} Sk={cache} {problem} \
                     splits={splits}"
                );
                let mut case = report(&name, &times, flops, kernel.entry);
                case["problem"] = json!(problem);
                case["splits"] = json!(splits);
                case["page_size"] = json!(page_size);
                case["chunks"] = json!(vec![[chunk, cache]; batch]);
                case["heads_kv"] = json!(heads_kv);
                results.push(case);
            }
        }
        let dense = plan_on(f16::DTYPE, &shape, &options, sm, capability)?;
        let times = time_launches(gpu.stream(), warmup, repeats, launches, || {
            gpu.forward(&q, &k, &v, &mut output, None, shape, &options)
        })?;
        let name = format!("H=32/{heads_kv} chunked B={batch} Sq={chunk} Sk={cache} dense");
        let mut case = report(&name, &times, flops, dense.kernel().entry);
        case["problem"] = json!("dense");
        case["chunks"] = json!(vec![[chunk, cache]; batch]);
        case["heads_kv"] = json!(heads_kv);
        results.push(case);
    }
    let mut cu_seqlens_q = vec![0u32];
    for &(queries, _) in &RAGGED_CHUNKS {
        cu_seqlens_q.push(cu_seqlens_q[cu_seqlens_q.len() - 1] + queries);
    }
    let used: Vec<u32> = RAGGED_CHUNKS.iter().map(|&(_, keys)| keys).collect();
    let lens = DeviceBuffer::from_slice(&used)?;
    let shape = VarlenCacheShape {
        cu_seqlens_q: &cu_seqlens_q,
        heads_q,
        heads_kv: ragged_heads_kv,
        seq_len_kv: RAGGED_CACHE_CAPACITY,
        head_dim,
    };
    let extents = shape.extents()?;
    let flops: f64 = RAGGED_CHUNKS
        .iter()
        .map(|&(queries, keys)| heads_q as f64 * chunk_flops(queries, keys, head_dim))
        .sum();
    let default = plan_varlen_kv_cache_on(f16::DTYPE, &extents, None, &options, sm, capability)?;
    let sm80 = plan_varlen_kv_cache(f16::DTYPE, &extents, None, &options, sm)?.kernel();
    for (problem, kernel, options) in cases(default.kernel(), sm80) {
        let plan = plan_varlen_kv_cache_on(f16::DTYPE, &extents, None, &options, sm, capability);
        let splits = plan?.splits();
        let times = time_launches(gpu.stream(), warmup, repeats, launches, || {
            gpu.forward_varlen_kv_cache(&q, &k, &v, &lens, &mut output, None, &shape, &options)
        })?;
        let name = format!("H=32/8 ragged chunks {problem} splits={splits}");
        let mut case = report(&name, &times, flops, kernel.entry);
        case["problem"] = json!(format!("ragged-{problem}"));
        case["splits"] = json!(splits);
        case["chunks"] = json!(RAGGED_CHUNKS);
        case["heads_kv"] = json!(ragged_heads_kv);
        results.push(case);
    }
    Ok(json!({
        "device": gpu.device_name(),
        "dtype": f16::DTYPE.name(),
        "layout": "bshd",
        "causal": true,
        "heads_q": heads_q,
        "head_dim": head_dim,
        "flop_count": "4 * heads_q * head_dim * visible scores (bottom-right causal) per sequence",
        "warmup": warmup,
        "repeats": repeats,
        "launches_per_repeat": launches,
        "results": results,
    }))
}

/// The fp16 sm90 kernels of `variant` (serving or paged) and `head_dim` that a device of
/// `capability` runs (none off Hopper): the tiles the prefill timings put beside the default's.
fn sm90_kernels(
    variant: Variant,
    head_dim: usize,
    capability: (i32, i32),
) -> impl Iterator<Item = &'static ForwardKernel> {
    FORWARD_KERNELS.iter().filter(move |kernel| {
        kernel.spec.family == Family::Sm90
            && kernel.spec.variant == variant
            && kernel.spec.dtype == f16::DTYPE
            && kernel.spec.tile.head_dim == head_dim
            && kernel.runs_on(capability)
    })
}

/// One prefill line: median, spread, TFLOP/s of `flops` at the median, the kernel; returns the
/// same figures as JSON.
fn report(
    name: &str,
    times: &flash_attn_tools::timing::LaunchTimes,
    flops: f64,
    kernel: &str,
) -> Value {
    let median = times.median();
    let tflops = flops / (median * 1e-6) / 1e12;
    println!(
        "f16 {name}: {median:.1} us (p10-p90 {:.1}-{:.1}), {tflops:.1} TFLOP/s, \
         {kernel}, host {:.1} us/launch",
        times.quantile(0.1),
        times.quantile(0.9),
        times.host_us_per_launch
    );
    let microseconds = |value: f64| rounded(value, 3);
    json!({
        "median_us": microseconds(median),
        "p10_us": microseconds(times.quantile(0.1)),
        "p90_us": microseconds(times.quantile(0.9)),
        "samples_us": times.per_launch_us.iter().map(|&t| microseconds(t)).collect::<Vec<_>>(),
        "host_us_per_launch": microseconds(times.host_us_per_launch),
        "flops": flops,
        "tflops": rounded(tflops, 1),
        "kernel": kernel,
    })
}
