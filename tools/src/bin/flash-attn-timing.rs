//! Times exposed kernels with CUDA events around back-to-back launches and writes the
//! figures as JSON for `scripts/peer_compare.py`.
//!
//! `flash-attn-timing [--json PATH] [--all-kernels | --kernel ENTRY] [--shape B,H,S,D]
//! [--seq-len-kv SK]`: the kernel the default API dispatches to (or every kernel of the
//! matching element type and head dim, or the one named) on the anchor shapes (or the one
//! given), causal and not, fp16 and bf16; median, spread and TFLOP/s per case. With
//! `--seq-len-kv`, every shape has `SK` keys per sequence and `S` queries (the causal mask
//! bottom-right aligned, as a prefill after a cached prefix); TFLOP/s then count
//! `4 · B · H · S · SK · D`, halved for causal, as for every shape.

use cust::memory::DeviceBuffer;
use flash_attn::reference::random_normal;
use flash_attn::{
    kernel_by_name, plan_on, AttentionShape, Dtype, Element, Error, FlashAttention, ForwardKernel,
    ForwardOptions, Variant, FORWARD_KERNELS,
};
use flash_attn_tools::timing::{
    parse_shape, shape_label, time_launches, LaunchTimes, TimedCase, TimingFile, ANCHOR_SHAPES,
};
use half::{bf16, f16};

const WARMUP_LAUNCHES: usize = 50;
const REPEATS: usize = 30;
const MIN_LAUNCHES_PER_REPEAT: usize = 20;

struct Measurement {
    shape: AttentionShape,
    causal: bool,
    kernel: &'static ForwardKernel,
    times: LaunchTimes,
}

impl Measurement {
    fn tflops(&self) -> f64 {
        self.shape.flops(self.causal) / (self.times.median() * 1e-6) / 1e12
    }

    fn case(&self) -> TimedCase {
        TimedCase::new(&self.shape, self.causal, self.kernel, &self.times)
    }
}

fn measure<T: Element>(
    gpu: &FlashAttention,
    shape: AttentionShape,
    options: &ForwardOptions,
) -> Result<LaunchTimes, Error> {
    let (q_elements, kv_elements) = (shape.q_elements()?, shape.kv_elements()?);
    let input =
        |elements, seed| DeviceBuffer::from_slice(&random_normal::<T>(elements, 0.5, 1.0, seed));
    let (q, k, v) = (
        input(q_elements, 11)?,
        input(kv_elements, 12)?,
        input(kv_elements, 13)?,
    );
    let mut output = DeviceBuffer::from_slice(&vec![T::from_f64(0.0); q_elements])?;
    // About a millisecond of work per repeat at 200 TFLOP/s.
    let launches =
        ((2e8 / shape.flops(options.causal) * 1e3) as usize).max(MIN_LAUNCHES_PER_REPEAT);
    time_launches(gpu.stream(), WARMUP_LAUNCHES, REPEATS, launches, || {
        gpu.forward(&q, &k, &v, &mut output, None, shape, options)
    })
}

/// The kernel the default API runs for a plain problem on this device: its plan's (the sm_90a
/// table first on compute capability 9.0; a head dim without kernels of its own on the modified
/// kernel of the head dim it pads to, which the dispatch table's dense kernel of that head dim
/// cannot run).
fn default_kernel(
    gpu: &FlashAttention,
    dtype: Dtype,
    shape: &AttentionShape,
    causal: bool,
) -> Result<&'static ForwardKernel, Error> {
    let options = ForwardOptions {
        causal,
        ..Default::default()
    };
    let plan = plan_on(
        dtype,
        shape,
        &options,
        gpu.sm_count(),
        gpu.compute_capability(),
    )?;
    Ok(plan.kernel())
}

fn main() -> Result<(), Error> {
    const USAGE: &str =
        "usage: flash-attn-timing [--json PATH] [--all-kernels | --kernel ENTRY] [--shape B,H,S,D] [--seq-len-kv SK]";
    let mut json_path = None;
    let mut all_kernels = false;
    let mut only_kernel: Option<&'static ForwardKernel> = None;
    let mut shapes = ANCHOR_SHAPES.to_vec();
    let mut seq_len_kv = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--json" => json_path = Some(args.next().expect("--json needs a path")),
            "--all-kernels" => all_kernels = true,
            "--kernel" => {
                let name = args.next().expect("--kernel needs an entry name");
                only_kernel = Some(kernel_by_name(&name)?);
            }
            "--shape" => {
                let text = args.next().expect("--shape needs B,H,S,D");
                let shape = parse_shape(&text)
                    .unwrap_or_else(|| panic!("--shape needs four sizes, got {text:?}; {USAGE}"));
                shapes = vec![shape];
            }
            "--seq-len-kv" => {
                let text = args.next().expect("--seq-len-kv needs a key count");
                let keys: usize = text.parse().unwrap_or_else(|_| {
                    panic!("--seq-len-kv needs a count, got {text:?}; {USAGE}")
                });
                seq_len_kv = Some(keys);
            }
            other => panic!("unknown argument {other:?}; {USAGE}"),
        }
    }
    if all_kernels && only_kernel.is_some() {
        panic!("--all-kernels and --kernel exclude each other; {USAGE}");
    }
    let gpu = FlashAttention::new()?;
    println!(
        "{:<16} {:<6} {:<5} {:<36} {:>10} {:>21} {:>8} {:>8}",
        "B,H,S,D", "causal", "dtype", "kernel", "median us", "p10-p90 us", "TFLOP/s", "host us"
    );
    let mut measurements = Vec::new();
    for dtype in [Dtype::F16, Dtype::Bf16] {
        for &(batch, heads, seq_len, head_dim) in &shapes {
            let shape = AttentionShape {
                seq_len_kv: seq_len_kv.unwrap_or(seq_len),
                ..AttentionShape::new(batch, heads, seq_len, head_dim)
            };
            for causal in [false, true] {
                let kernels: Vec<&'static ForwardKernel> = if let Some(kernel) = only_kernel {
                    if kernel.spec.dtype != dtype || kernel.spec.tile.head_dim != head_dim {
                        continue;
                    }
                    vec![kernel]
                } else if all_kernels {
                    FORWARD_KERNELS
                        .iter()
                        .filter(|k| k.spec.variant == Variant::Dense)
                        .filter(|k| k.spec.dtype == dtype && k.spec.tile.head_dim == head_dim)
                        .filter(|k| k.runs_on(gpu.compute_capability()))
                        .collect()
                } else {
                    vec![default_kernel(&gpu, dtype, &shape, causal)?]
                };
                for &kernel in &kernels {
                    let options = ForwardOptions {
                        causal,
                        kernel: Some(kernel),
                        ..Default::default()
                    };
                    let times = match dtype {
                        Dtype::F16 => measure::<f16>(&gpu, shape, &options)?,
                        Dtype::Bf16 => measure::<bf16>(&gpu, shape, &options)?,
                    };
                    let measurement = Measurement {
                        shape,
                        causal,
                        kernel,
                        times,
                    };
                    println!(
                        "{:<16} {:<6} {:<5} {:<36} {:>10.2} {:>10.2}-{:<10.2} {:>8.1} {:>8.2}",
                        shape_label(batch, heads, seq_len, seq_len_kv, head_dim),
                        causal,
                        format!("{dtype:?}"),
                        kernel.entry,
                        measurement.times.median(),
                        measurement.times.quantile(0.1),
                        measurement.times.quantile(0.9),
                        measurement.tflops(),
                        measurement.times.host_us_per_launch
                    );
                    measurements.push(measurement);
                }
            }
        }
    }
    if let Some(path) = json_path {
        let cases = |keep: &dyn Fn(&Measurement) -> bool| {
            measurements
                .iter()
                .filter(|m| keep(m))
                .map(Measurement::case)
                .collect()
        };
        let is_default = |m: &Measurement| {
            default_kernel(&gpu, m.kernel.spec.dtype, &m.shape, m.causal)
                .is_ok_and(|d| d == m.kernel)
        };
        let file = TimingFile {
            device: gpu.device_name().to_owned(),
            results: cases(&is_default),
            all_kernels: cases(&|_| true),
        };
        let json = serde_json::to_string(&file).expect("plain data serialises");
        std::fs::write(&path, json).expect("writing the JSON");
        println!("wrote {path}");
    }
    Ok(())
}
