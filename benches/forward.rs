//! Criterion benchmark of the forward pass over the anchor shapes (`ANCHOR_SHAPES`, the shapes
//! of the peer comparison in the README's results), causal and not,
//! fp16 and bf16, default kernels; timed with CUDA events around back-to-back launches on one
//! stream. Throughput is in FLOP (criterion prints it as "elem/s"): `4 · B · H · S² · D` per call,
//! halved for causal.
//!
//! The `modifiers_f16` group times the score modifiers beside the plain problem on two shapes:
//! softcap 30, ALiBi (one slope per head, by device address: no upload timed) and both, at the
//! long anchor shape causal and at 8,16,2048,64 full; and the sliding window of 1024 keys at
//! 2,16,8192,128 causal beside the plain causal problem (the window target, which
//! `flash-attn-modifier-timing` checks).
//!
//! Without a GPU it says so and exits 0. Filter as usual, e.g. `cargo bench -- B4_H8_S512_D64`.

use std::time::Duration;

use criterion::{BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use cust::event::{Event, EventFlags};
use cust::memory::DeviceBuffer;
use flash_attn::reference::random_normal;
use flash_attn::{
    AlibiLayout, AttentionShape, Element, Error, FlashAttention, ForwardOptions, RawAlibiSlopes,
    RawTensors, SlidingWindow,
};
use flash_attn_tools::timing::ANCHOR_SHAPES;
use half::{bf16, f16};

fn bench_shape<T: Element>(
    group: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    gpu: &FlashAttention,
    shape: AttentionShape,
    causal: bool,
) {
    let input = |seed| {
        DeviceBuffer::from_slice(&random_normal::<T>(
            shape.q_elements().unwrap(),
            0.5,
            1.0,
            seed,
        ))
    };
    let (q, k, v) = (input(1).unwrap(), input(2).unwrap(), input(3).unwrap());
    let mut output =
        DeviceBuffer::from_slice(&vec![T::from_f64(0.0); shape.q_elements().unwrap()]).unwrap();
    let options = ForwardOptions {
        causal,
        ..ForwardOptions::default()
    };
    group.throughput(Throughput::Elements(shape.flops(causal) as u64));
    let AttentionShape {
        batch,
        heads_q,
        seq_len_q,
        head_dim,
        ..
    } = shape;
    let mask = if causal { "causal" } else { "full" };
    let id = BenchmarkId::from_parameter(format!(
        "B{batch}_H{heads_q}_S{seq_len_q}_D{head_dim}_{mask}"
    ));
    group.bench_function(id, |bencher| {
        bencher.iter_custom(|launches| {
            let start = Event::new(EventFlags::DEFAULT).unwrap();
            let stop = Event::new(EventFlags::DEFAULT).unwrap();
            start.record(gpu.stream()).unwrap();
            for _ in 0..launches {
                gpu.forward(&q, &k, &v, &mut output, None, shape, &options)
                    .unwrap();
            }
            stop.record(gpu.stream()).unwrap();
            stop.synchronize().unwrap();
            stop.elapsed(&start).unwrap()
        });
    });
}

/// One modifier case of the `modifiers_f16` group: `options` on `shape`, with ALiBi slopes (one
/// per head, on the device) or without, through the raw entry points.
fn bench_modifier(
    group: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    gpu: &FlashAttention,
    shape: AttentionShape,
    name: &str,
    options: ForwardOptions,
    alibi: bool,
) {
    let elements = shape.q_elements().unwrap();
    let input = |seed| DeviceBuffer::from_slice(&random_normal::<f16>(elements, 0.5, 1.0, seed));
    let (q, k, v) = (input(1).unwrap(), input(2).unwrap(), input(3).unwrap());
    let output = DeviceBuffer::from_slice(&vec![f16::ZERO; elements]).unwrap();
    let slopes: Vec<f32> = (0..shape.heads_q)
        .map(|h| 2f32.powf(-8.0 * (h + 1) as f32 / shape.heads_q as f32))
        .collect();
    let slopes = DeviceBuffer::from_slice(&slopes).unwrap();
    let tensors = RawTensors {
        q: q.as_device_ptr().as_raw(),
        k: k.as_device_ptr().as_raw(),
        v: v.as_device_ptr().as_raw(),
        o: output.as_device_ptr().as_raw(),
        lse: None,
    };
    let raw_slopes = RawAlibiSlopes {
        address: slopes.as_device_ptr().as_raw(),
        layout: AlibiLayout::PerHead,
    };
    // The plain problem's FLOPs: for the window, the causal problem's, so that its rate reads
    // as the causal rate it would take to finish as soon.
    group.throughput(Throughput::Elements(shape.flops(options.causal) as u64));
    let AttentionShape {
        batch,
        heads_q,
        seq_len_q,
        head_dim,
        ..
    } = shape;
    let id = BenchmarkId::from_parameter(format!(
        "B{batch}_H{heads_q}_S{seq_len_q}_D{head_dim}_{name}"
    ));
    group.bench_function(id, |bencher| {
        bencher.iter_custom(|launches| {
            let start = Event::new(EventFlags::DEFAULT).unwrap();
            let stop = Event::new(EventFlags::DEFAULT).unwrap();
            let stream = gpu.stream().as_inner();
            start.record(gpu.stream()).unwrap();
            for _ in 0..launches {
                // SAFETY: the buffers hold the dense tensors of `shape` and one slope per
                // head, alive until the synchronize below, on the instance's own stream.
                unsafe {
                    if alibi {
                        let dtype = flash_attn::Dtype::F16;
                        gpu.forward_alibi_raw(stream, dtype, tensors, raw_slopes, shape, &options)
                    } else {
                        gpu.forward_raw(stream, flash_attn::Dtype::F16, tensors, shape, &options)
                    }
                }
                .unwrap();
            }
            stop.record(gpu.stream()).unwrap();
            stop.synchronize().unwrap();
            stop.elapsed(&start).unwrap()
        });
    });
}

fn bench_modifiers(criterion: &mut Criterion, gpu: &FlashAttention) {
    let mut group = criterion.benchmark_group("modifiers_f16");
    for (shape, causal) in [
        (AttentionShape::new(2, 16, 4096, 128), true),
        (AttentionShape::new(8, 16, 2048, 64), false),
    ] {
        let plain = ForwardOptions {
            causal,
            ..ForwardOptions::default()
        };
        let capped = ForwardOptions {
            softcap: Some(30.0),
            ..plain
        };
        let mask = if causal { "causal" } else { "full" };
        for (name, options, alibi) in [
            ("plain", plain, false),
            ("softcap", capped, false),
            ("alibi", plain, true),
            ("softcap_alibi", capped, true),
        ] {
            let name = format!("{mask}_{name}");
            bench_modifier(&mut group, gpu, shape, &name, options, alibi);
        }
    }
    let shape = AttentionShape::new(2, 16, 8192, 128);
    let causal = ForwardOptions {
        causal: true,
        ..ForwardOptions::default()
    };
    let window = ForwardOptions {
        window: Some(SlidingWindow {
            left: Some(1023),
            right: Some(0),
        }),
        ..causal
    };
    bench_modifier(&mut group, gpu, shape, "causal", causal, false);
    bench_modifier(&mut group, gpu, shape, "window1024", window, false);
    group.finish();
}

fn main() {
    let gpu = match FlashAttention::new() {
        Ok(gpu) => gpu,
        Err(Error::NoGpu(error)) => {
            println!("no CUDA GPU ({error}): skipping the forward benchmark");
            return;
        }
        Err(error) => panic!("could not set up the GPU: {error}"),
    };
    println!("benchmarking on {}", gpu.device_name());
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .configure_from_args();
    for (name, bf16_inputs) in [("forward_f16", false), ("forward_bf16", true)] {
        let mut group = criterion.benchmark_group(name);
        for (batch, heads, seq_len, head_dim) in ANCHOR_SHAPES {
            let shape = AttentionShape::new(batch, heads, seq_len, head_dim);
            for causal in [false, true] {
                if bf16_inputs {
                    bench_shape::<bf16>(&mut group, &gpu, shape, causal);
                } else {
                    bench_shape::<f16>(&mut group, &gpu, shape, causal);
                }
            }
        }
        group.finish();
    }
    bench_modifiers(&mut criterion, &gpu);
    criterion.final_summary();
}
