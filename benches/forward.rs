//! Criterion benchmark of the forward pass over the anchor shapes (`ANCHOR_SHAPES`, the shapes
//! of the peer comparison in the README's results), causal and not,
//! fp16 and bf16, default kernels; timed with CUDA events around back-to-back launches on one
//! stream. Throughput is in FLOP (criterion prints it as "elem/s"): `4 · B · H · S² · D` per call,
//! halved for causal.
//!
//! Without a GPU it says so and exits 0. Filter as usual, e.g. `cargo bench -- B4_H8_S512_D64`.

use std::time::Duration;

use criterion::{BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use cust::event::{Event, EventFlags};
use cust::memory::DeviceBuffer;
use flash_attn::reference::random_normal;
use flash_attn::{AttentionShape, Element, Error, FlashAttention, ForwardOptions};
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
    criterion.final_summary();
}
