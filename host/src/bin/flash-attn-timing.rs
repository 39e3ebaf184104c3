//! Times compiled kernels with CUDA events around back-to-back launches and writes the
//! figures as JSON for `scripts/peer_compare.py`.
//!
//! `flash-attn-timing [--json PATH] [--all-kernels]`: the default kernel (or every kernel) on
//! the peer-comparison shapes; median, spread and TFLOP/s per shape.

use std::fmt::Write as _;

use cust::memory::DeviceBuffer;
use flash_attn::reference::random_normal_f16;
use flash_attn::timing::{time_launches, LaunchTimes};
use flash_attn::{
    default_kernel, AttentionShape, Error, FlashAttention, ForwardKernel, ForwardOptions,
    FORWARD_KERNELS,
};
use half::f16;

/// The head-dim-64 shapes of the anchor table (non-causal: causal is not supported yet).
const SHAPES: [(usize, usize, usize, usize); 4] = [
    (4, 8, 512, 64),
    (16, 16, 512, 64),
    (32, 16, 512, 64),
    (8, 16, 2048, 64),
];
const WARMUP_LAUNCHES: usize = 50;
const REPEATS: usize = 30;
/// Enough back-to-back launches per repeat that one repeat takes about a millisecond or more.
const MIN_LAUNCHES_PER_REPEAT: usize = 20;

struct Measurement {
    shape: AttentionShape,
    kernel: &'static ForwardKernel,
    times: LaunchTimes,
}

fn measure(
    gpu: &FlashAttention,
    shape: AttentionShape,
    kernel: &'static ForwardKernel,
) -> Result<LaunchTimes, Error> {
    let input =
        |seed| DeviceBuffer::from_slice(&random_normal_f16(shape.elements(), 0.5, 1.0, seed));
    let (q, k, v) = (input(11)?, input(12)?, input(13)?);
    let mut output = DeviceBuffer::from_slice(&vec![f16::ZERO; shape.elements()])?;
    let options = ForwardOptions {
        kernel: Some(kernel),
        ..ForwardOptions::default()
    };
    // ~1 ms per repeat at 200 TFLOP/s.
    let launches = ((2e8 / shape.flops() * 1e3) as usize).max(MIN_LAUNCHES_PER_REPEAT);
    time_launches(gpu.stream(), WARMUP_LAUNCHES, REPEATS, launches, || {
        gpu.forward(&q, &k, &v, &mut output, shape, &options)
    })
}

fn json_row(m: &Measurement) -> String {
    let s = m.shape;
    let median = m.times.median();
    format!(
        concat!(
            "{{\"batch\":{},\"heads\":{},\"seq_len\":{},\"head_dim\":{},\"causal\":false,\"dtype\":\"f16\",",
            "\"median_us\":{:.3},\"min_us\":{:.3},\"max_us\":{:.3},\"p10_us\":{:.3},\"p90_us\":{:.3},",
            "\"repeats\":{},\"launches_per_repeat\":{},\"tflops\":{:.1},\"config\":\"{}\"}}"
        ),
        s.batch,
        s.heads,
        s.seq_len,
        s.head_dim,
        median,
        m.times.quantile(0.0),
        m.times.quantile(1.0),
        m.times.quantile(0.1),
        m.times.quantile(0.9),
        m.times.per_launch_us.len(),
        m.times.launches_per_repeat,
        s.flops() / (median * 1e-6) / 1e12,
        m.kernel.entry
    )
}

fn main() -> Result<(), Error> {
    let mut json_path = None;
    let mut all_kernels = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--json" => json_path = Some(args.next().expect("--json needs a path")),
            "--all-kernels" => all_kernels = true,
            other => panic!("unknown argument {other:?}; usage: flash-attn-timing [--json PATH] [--all-kernels]"),
        }
    }
    let gpu = FlashAttention::new()?;
    let kernels: Vec<&'static ForwardKernel> = if all_kernels {
        FORWARD_KERNELS.iter().collect()
    } else {
        vec![default_kernel()]
    };

    println!(
        "{:<18} {:<36} {:>10} {:>21} {:>9}",
        "B,H,S,D", "kernel", "median us", "p10-p90 us", "TFLOP/s"
    );
    let mut measurements = Vec::new();
    for (batch, heads, seq_len, head_dim) in SHAPES {
        let shape = AttentionShape {
            batch,
            heads,
            seq_len,
            head_dim,
        };
        for &kernel in &kernels {
            let times = measure(&gpu, shape, kernel)?;
            let median = times.median();
            println!(
                "{:<18} {:<36} {:>10.2} {:>10.2}-{:<10.2} {:>9.1}",
                format!("{batch},{heads},{seq_len},{head_dim}"),
                kernel.entry,
                median,
                times.quantile(0.1),
                times.quantile(0.9),
                shape.flops() / (median * 1e-6) / 1e12
            );
            measurements.push(Measurement {
                shape,
                kernel,
                times,
            });
        }
    }
    if let Some(path) = json_path {
        let mut json = String::new();
        write!(json, "{{\"device\":\"{}\",\"results\":[", gpu.device_name()).unwrap();
        let rows: Vec<String> = measurements
            .iter()
            .filter(|m| std::ptr::eq(m.kernel, default_kernel()))
            .map(json_row)
            .collect();
        write!(json, "{}],\"all_kernels\":[", rows.join(",")).unwrap();
        let rows: Vec<String> = measurements.iter().map(json_row).collect();
        write!(json, "{}]}}", rows.join(",")).unwrap();
        std::fs::write(&path, json).expect("writing the JSON");
        println!("wrote {path}");
    }
    Ok(())
}
