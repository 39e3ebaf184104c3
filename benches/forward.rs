//! Criterion benchmark of the forward pass, timed with CUDA events around back-to-back
//! launches on one stream. Throughput is in FLOP (criterion prints it as "elem/s"):
//! `4 · B · H · S² · D` per call.
//!
//! Without a GPU it says so and exits 0.

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput};
use cust::event::{Event, EventFlags};
use cust::memory::DeviceBuffer;
use flash_attn::reference::random_normal;
use flash_attn::{AttentionShape, Error, FlashAttention, ForwardOptions};
use half::f16;

const SHAPES: [(usize, usize, usize, usize); 3] =
    [(4, 8, 512, 64), (16, 16, 512, 64), (32, 16, 512, 64)];

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
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    let mut group = criterion.benchmark_group("forward_f16");
    for (batch, heads, seq_len, head_dim) in SHAPES {
        let shape = AttentionShape::new(batch, heads, seq_len, head_dim);
        let input = |seed| {
            DeviceBuffer::from_slice(&random_normal::<f16>(shape.q_elements(), 0.5, 1.0, seed))
        };
        let (q, k, v) = (input(1).unwrap(), input(2).unwrap(), input(3).unwrap());
        let mut output = DeviceBuffer::from_slice(&vec![f16::ZERO; shape.q_elements()]).unwrap();
        let options = ForwardOptions::default();
        group.throughput(Throughput::Elements(shape.flops(false) as u64));
        let id = BenchmarkId::from_parameter(format!("B{batch}_H{heads}_S{seq_len}_D{head_dim}"));
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
    group.finish();
    criterion.final_summary();
}
