//! Criterion benchmark of the serving calls: decode against a contiguous KV cache
//! (`forward_kv_cache`) and against paged caches of 16, 64 and 256 keys per page
//! (`forward_paged_kv_cache`, shuffled block tables) at the serving issue's shapes
//! (`DECODE_SHAPES`: D=128, one query row, 32 query heads over 8 K/V heads), fp16 and bf16,
//! throughput in K+V bytes read; a chunked prefill against the same caches (`CHUNKED_PREFILL`:
//! 4 sequences of 512 new queries over 4,096 cached keys, causal, fp16, D=128, GQA 32/8, on
//! Hopper the sm90 serving and paged kernels); and the variable-length prefill
//! (`forward_varlen`, 16 sequences of 128-4096 tokens, fp16, D=128, GQA 32/8); the prefills'
//! throughput in FLOP of real work.
//! Timed with CUDA events around back-to-back launches on one stream.
//!
//! Without a GPU it says so and exits 0. Filter as usual, e.g. `cargo bench --bench serving --
//! paged16`.

use std::time::Duration;

use criterion::{BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use cust::event::{Event, EventFlags};
use cust::memory::DeviceBuffer;
use flash_attn::reference::random_normal;
use flash_attn::{
    AttentionShape, Element, Error, FlashAttention, ForwardOptions, Layout, VarlenShape,
};
use flash_attn_tools::timing::{
    chunk_flops, decode_shape, shuffled_pages, varlen_prefill_offsets, DECODE_HEAD_DIM,
    DECODE_SHAPES, PAGE_SIZES,
};
use half::{bf16, f16};

type Group<'a> = BenchmarkGroup<'a, criterion::measurement::WallTime>;

/// Times `launch` with CUDA events around `launches` back-to-back calls.
fn bench_launches(
    group: &mut Group<'_>,
    gpu: &FlashAttention,
    id: String,
    mut launch: impl FnMut() -> Result<(), Error>,
) {
    group.bench_function(BenchmarkId::from_parameter(id), |bencher| {
        bencher.iter_custom(|launches| {
            let start = Event::new(EventFlags::DEFAULT).unwrap();
            let stop = Event::new(EventFlags::DEFAULT).unwrap();
            start.record(gpu.stream()).unwrap();
            for _ in 0..launches {
                launch().unwrap();
            }
            stop.record(gpu.stream()).unwrap();
            stop.synchronize().unwrap();
            stop.elapsed(&start).unwrap()
        });
    });
}

/// Benchmarks the cache calls of `shape` (every sequence's cache `length` keys long): against
/// a contiguous cache as `{name}_contiguous`, and against paged caches of each of `PAGE_SIZES`
/// keys a page (shuffled block tables) as `{name}_paged{size}`, under the group's throughput.
fn bench_cache_calls<T: Element>(
    group: &mut Group<'_>,
    gpu: &FlashAttention,
    shape: AttentionShape,
    length: usize,
    options: &ForwardOptions,
    name: &str,
) {
    let kv = shape.kv_elements().unwrap();
    let input = |elements, seed| {
        DeviceBuffer::from_slice(&random_normal::<T>(elements, 0.5, 1.0, seed)).unwrap()
    };
    let (q, k, v) = (
        input(shape.q_elements().unwrap(), 1),
        input(kv, 2),
        input(kv, 3),
    );
    let lens = DeviceBuffer::from_slice(&vec![length as u32; shape.batch]).unwrap();
    let mut output =
        DeviceBuffer::from_slice(&vec![T::from_f64(0.0); shape.q_elements().unwrap()]).unwrap();
    bench_launches(group, gpu, format!("{name}_contiguous"), || {
        gpu.forward_kv_cache(&q, &k, &v, &lens, &mut output, None, shape, options)
    });
    for page_size in PAGE_SIZES {
        let (paged, table) = shuffled_pages(shape.batch, length, page_size);
        let table = DeviceBuffer::from_slice(&table).unwrap();
        bench_launches(group, gpu, format!("{name}_paged{page_size}"), || {
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
                options,
            )
        });
    }
}

fn bench_decode<T: Element>(group: &mut Group<'_>, gpu: &FlashAttention) {
    let options = ForwardOptions {
        layout: Layout::Bshd,
        ..ForwardOptions::default()
    };
    for (batch, length) in DECODE_SHAPES {
        let shape = decode_shape(batch, length, DECODE_HEAD_DIM);
        group.throughput(Throughput::Bytes(
            2 * shape.kv_elements().unwrap() as u64 * 2,
        ));
        bench_cache_calls::<T>(
            group,
            gpu,
            shape,
            length,
            &options,
            &format!("B{batch}_L{length}"),
        );
    }
}

/// The chunked prefill `(sequences, new queries each, cached keys each)`: each sequence's chunk
/// of queries against a full cache (its own keys included), causal.
const CHUNKED_PREFILL: (usize, usize, usize) = (4, 512, 4096);

fn bench_chunked_prefill(group: &mut Group<'_>, gpu: &FlashAttention) {
    let (batch, chunk, cache) = CHUNKED_PREFILL;
    let shape = AttentionShape {
        batch,
        heads_q: 32,
        heads_kv: 8,
        seq_len_q: chunk,
        seq_len_kv: cache,
        head_dim: 128,
    };
    let options = ForwardOptions {
        causal: true,
        layout: Layout::Bshd,
        ..ForwardOptions::default()
    };
    let flops = (batch * shape.heads_q) as f64 * chunk_flops(chunk as u32, cache as u32, 128);
    group.throughput(Throughput::Elements(flops as u64));
    bench_cache_calls::<f16>(
        group,
        gpu,
        shape,
        cache,
        &options,
        &format!("B{batch}_{chunk}_over_{cache}"),
    );
}

fn bench_varlen(group: &mut Group<'_>, gpu: &FlashAttention) {
    let offsets = varlen_prefill_offsets();
    let shape = VarlenShape {
        cu_seqlens_q: &offsets,
        cu_seqlens_kv: &offsets,
        heads_q: 32,
        heads_kv: 8,
        head_dim: 128,
    };
    let tokens = offsets[offsets.len() - 1] as usize;
    let input = |heads, seed| {
        DeviceBuffer::from_slice(&random_normal::<f16>(tokens * heads * 128, 0.5, 1.0, seed))
            .unwrap()
    };
    let (q, k, v) = (input(32, 1), input(8, 2), input(8, 3));
    let mut output =
        DeviceBuffer::from_slice(&vec![f16::from_f64(0.0); tokens * 32 * 128]).unwrap();
    for causal in [false, true] {
        let options = ForwardOptions {
            causal,
            layout: Layout::Bshd,
            ..ForwardOptions::default()
        };
        group.throughput(Throughput::Elements(shape.flops(causal) as u64));
        let mask = if causal { "causal" } else { "full" };
        bench_launches(
            group,
            gpu,
            format!("16_sequences_{tokens}_tokens_{mask}"),
            || gpu.forward_varlen(&q, &k, &v, &mut output, None, &shape, &options),
        );
    }
}

fn main() {
    let gpu = match FlashAttention::new() {
        Ok(gpu) => gpu,
        Err(Error::NoGpu(error)) => {
            println!("no CUDA GPU ({error}): skipping the serving benchmark");
            return;
        }
        Err(error) => panic!("could not set up the GPU: {error}"),
    };
    println!("benchmarking on {}", gpu.device_name());
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .configure_from_args();
    let mut group = criterion.benchmark_group("decode_f16");
    bench_decode::<f16>(&mut group, &gpu);
    group.finish();
    let mut group = criterion.benchmark_group("decode_bf16");
    bench_decode::<bf16>(&mut group, &gpu);
    group.finish();
    let mut group = criterion.benchmark_group("chunked_prefill_f16");
    bench_chunked_prefill(&mut group, &gpu);
    group.finish();
    let mut group = criterion.benchmark_group("varlen_prefill_f16");
    bench_varlen(&mut group, &gpu);
    group.finish();
    criterion.final_summary();
}
