//! Times the score modifiers against the plain kernels with CUDA events around back-to-back
//! launches (fp16 and bf16), for the targets:
//!
//! - softcap and ALiBi at the anchor shapes (`ANCHOR_SHAPES`), causal and not: the plain
//!   problem (the dispatch table's kernel), softcap 30, ALiBi (one slope per head), both; each
//!   modified time against the plain one (target: at most 5% slower), and against the dense
//!   kernel of the modified kernel's own tile (what the modifiers cost, the tile aside);
//! - the sliding window at S = 8192, D = 128, causal, a window of 1024 keys (`(Some(1023),
//!   Some(0))`), and the same with softcap 30 (Gemma 2): against the dense causal time scaled
//!   by the visible fraction of query-key pairs (target: within 10%).
//!
//! ALiBi slopes are passed by device address (`forward_alibi_raw`), so that no upload is timed.
//! A case of ALiBi slopes all 0 ("modified, none on") runs the modified kernel (named) with
//! every modifier off: what the modified kernel costs before any modifier does. ALiBi alone
//! and the softcap alone run their single-modifier kernel where the device has one of the
//! plain problem's tile (the sm90 family's, `Variant::Alibi` and `Variant::Softcap`); "alibi,
//! modified kernel" and "softcap, modified kernel" run them on the modified kernel, named, as
//! before those kernels, for comparison (not the target's cases).
//!
//! `flash-attn-modifier-timing`: one line per case: the kernel, median and p10-p90 in
//! microseconds, and the ratios; a final line per target with the worst ratio and whether it
//! is met. `--every-tile` adds, per shape, each modifier on every modified kernel of its head
//! dim against the dense kernel of the same tile (and the softcap and ALiBi alone on the tile's
//! single-modifier kernels where built), and the window on each of them (the data for
//! choosing a modified kernel's tile); with `--head-dim D` only those of head dim D, and not the
//! targets' cases; with `--shape B,H,S,D` at that shape instead of the anchors, and not the
//! targets' cases. `--profile-launches [--shape B,H,S,D] [--causal]` instead
//! launches each case of one f16 problem (8,16,2048,64 not causal unless given) once, in the
//! order plain, modified with none on, softcap, ALiBi, both (and with `--causal` the window of
//! 1024 keys last), each through the kernel the device runs for it (the modified kernel named
//! for "none on"), and times nothing: the launches for `ncu`. `--window-sweep` instead
//! times windows of 256 to 8191 keys at the window shape on each modified tile, against the
//! tile's geometric floor (what separates the window's cost from the pairs its tiles compute).

use cust::memory::DeviceBuffer;
use flash_attn::reference::random_normal;
use flash_attn::{
    modified_kernel_on, plan_alibi_on, plan_on, AlibiLayout, AttentionShape, Dtype, Element, Error,
    FlashAttention, ForwardKernel, ForwardOptions, RawAlibiSlopes, RawTensors, SlidingWindow,
    Variant, FORWARD_KERNELS,
};
use flash_attn_tools::timing::{parse_shape, time_launches, LaunchTimes, ANCHOR_SHAPES};
use half::{bf16, f16};

const WARMUP_LAUNCHES: usize = 50;
const REPEATS: usize = 30;
const MIN_LAUNCHES_PER_REPEAT: usize = 20;

/// The bounds: softcap and ALiBi at most 5% slower than plain; the window within 10%
/// of the causal time scaled by its visible fraction.
const MODIFIER_BOUND: f64 = 1.05;
const WINDOW_BOUND: f64 = 1.10;

/// The window shape: S = 8192, D = 128; batch and heads as the long anchor shape's.
const WINDOW_SHAPE: (usize, usize, usize, usize) = (2, 16, 8192, 128);
/// A window of 1024 keys up to the diagonal.
const WINDOW: SlidingWindow = SlidingWindow {
    left: Some(1023),
    right: Some(0),
};
const SOFTCAP: f32 = 30.0;

/// One problem's device buffers.
struct Buffers<T: cust::memory::DeviceCopy> {
    q: DeviceBuffer<T>,
    k: DeviceBuffer<T>,
    v: DeviceBuffer<T>,
    output: DeviceBuffer<T>,
    slopes: DeviceBuffer<f32>,
    /// One slope 0 per head: ALiBi's kernel with no bias.
    zero_slopes: DeviceBuffer<f32>,
}

impl<T: Element> Buffers<T> {
    fn new(shape: &AttentionShape) -> Result<Self, Error> {
        let elements = shape.q_elements()?;
        let input = |seed| DeviceBuffer::from_slice(&random_normal::<T>(elements, 0.5, 1.0, seed));
        // BLOOM's slopes, 2^(-8 (h + 1) / heads).
        let slopes: Vec<f32> = (0..shape.heads_q)
            .map(|h| 2f32.powf(-8.0 * (h + 1) as f32 / shape.heads_q as f32))
            .collect();
        Ok(Self {
            q: input(11)?,
            k: input(12)?,
            v: input(13)?,
            output: DeviceBuffer::from_slice(&vec![T::from_f64(0.0); elements])?,
            slopes: DeviceBuffer::from_slice(&slopes)?,
            zero_slopes: DeviceBuffer::from_slice(&vec![0.0; shape.heads_q])?,
        })
    }

    fn tensors(&self) -> RawTensors {
        RawTensors {
            q: self.q.as_device_ptr().as_raw(),
            k: self.k.as_device_ptr().as_raw(),
            v: self.v.as_device_ptr().as_raw(),
            o: self.output.as_device_ptr().as_raw(),
            lse: None,
        }
    }
}

/// Times one call: `options` (a kernel named or not), with ALiBi slopes (one per head) or
/// without.
fn time<T: Element>(
    gpu: &FlashAttention,
    buffers: &Buffers<T>,
    shape: AttentionShape,
    options: &ForwardOptions,
    alibi: Option<&DeviceBuffer<f32>>,
) -> Result<(LaunchTimes, &'static ForwardKernel), Error> {
    // What the calls below run: the device's kernels (on compute capability 9.0 the sm90
    // family's where the sm_90a table has a row).
    let kernel = if alibi.is_some() {
        plan_alibi_on(
            T::DTYPE,
            &shape,
            options,
            AlibiLayout::PerHead,
            gpu.sm_count(),
            gpu.compute_capability(),
        )?
        .kernel()
    } else {
        plan_on(
            T::DTYPE,
            &shape,
            options,
            gpu.sm_count(),
            gpu.compute_capability(),
        )?
        .kernel()
    };
    // About a millisecond of work per repeat at 200 TFLOP/s.
    let launches =
        ((2e8 / shape.flops(options.causal) * 1e3) as usize).max(MIN_LAUNCHES_PER_REPEAT);
    let slopes = alibi.map(|slopes| RawAlibiSlopes {
        address: slopes.as_device_ptr().as_raw(),
        layout: AlibiLayout::PerHead,
    });
    let times = time_launches(gpu.stream(), WARMUP_LAUNCHES, REPEATS, launches, || {
        let stream = gpu.stream().as_inner();
        // SAFETY: the buffers hold the dense tensors of `shape` and one slope per head, and
        // outlive the launches (time_launches synchronises before it returns); the stream is
        // the instance's own.
        unsafe {
            match slopes {
                Some(slopes) => gpu.forward_alibi_raw(
                    stream,
                    T::DTYPE,
                    buffers.tensors(),
                    slopes,
                    shape,
                    options,
                ),
                None => gpu.forward_raw(stream, T::DTYPE, buffers.tensors(), shape, options),
            }
        }
    })?;
    Ok((times, kernel))
}

/// The kernel of `variant` with `kernel`'s family, element type and tile, where one is built.
fn twin_of(kernel: &ForwardKernel, variant: Variant) -> Option<&'static ForwardKernel> {
    FORWARD_KERNELS.iter().find(|twin| {
        twin.spec.variant == variant
            && twin.spec.family == kernel.spec.family
            && twin.spec.dtype == kernel.spec.dtype
            && twin.spec.tile == kernel.spec.tile
    })
}

/// The dense kernel of `kernel`'s tile and element type.
fn dense_of(kernel: &ForwardKernel) -> Option<&'static ForwardKernel> {
    twin_of(kernel, Variant::Dense)
}

fn print_case(label: &str, kernel: &ForwardKernel, times: &LaunchTimes, ratios: &str) {
    println!(
        "{label:<34} {:<38} {:>9.2} {:>9.2}-{:<9.2} {ratios}",
        kernel.entry,
        times.median(),
        times.quantile(0.1),
        times.quantile(0.9)
    );
}

/// The worst ratio seen per target.
#[derive(Default)]
struct Worst {
    modifiers: f64,
    window: f64,
}

fn time_dtype<T: Element>(gpu: &FlashAttention, worst: &mut Worst) -> Result<(), Error> {
    let dtype = format!("{:?}", T::DTYPE);
    for (batch, heads, seq_len, head_dim) in ANCHOR_SHAPES {
        let shape = AttentionShape::new(batch, heads, seq_len, head_dim);
        let buffers = Buffers::<T>::new(&shape)?;
        for causal in [false, true] {
            let label = format!("{dtype} {batch},{heads},{seq_len},{head_dim} causal={causal}");
            let plain = ForwardOptions {
                causal,
                ..ForwardOptions::default()
            };
            let (plain_times, plain_kernel) = time(gpu, &buffers, shape, &plain, None)?;
            print_case(&format!("{label} plain"), plain_kernel, &plain_times, "");
            let mut same_tile_plain: Option<(&ForwardKernel, f64)> = None;
            let modified = Some(modified_kernel_on(
                T::DTYPE,
                &shape,
                causal,
                gpu.sm_count(),
                gpu.compute_capability(),
            )?);
            // The kernel named (else the default API's), and whether the case has a modifier
            // on with the default API's kernel (the target's cases).
            for (name, kernel, softcap, alibi, modifies) in [
                (
                    "modified, none on",
                    modified,
                    None,
                    Some(&buffers.zero_slopes),
                    false,
                ),
                ("softcap", None, Some(SOFTCAP), None, true),
                (
                    "softcap, modified kernel",
                    modified,
                    Some(SOFTCAP),
                    None,
                    false,
                ),
                ("alibi", None, None, Some(&buffers.slopes), true),
                (
                    "alibi, modified kernel",
                    modified,
                    None,
                    Some(&buffers.slopes),
                    false,
                ),
                (
                    "softcap+alibi",
                    None,
                    Some(SOFTCAP),
                    Some(&buffers.slopes),
                    true,
                ),
            ] {
                let options = ForwardOptions {
                    softcap,
                    kernel,
                    ..plain
                };
                let (times, kernel) = time(gpu, &buffers, shape, &options, alibi)?;
                // The dense kernel of the modified kernel's tile, once per case.
                if same_tile_plain.is_none_or(|(dense, _)| dense.spec.tile != kernel.spec.tile) {
                    if let Some(dense) = dense_of(kernel) {
                        let named = ForwardOptions {
                            kernel: Some(dense),
                            ..plain
                        };
                        let (times, _) = time(gpu, &buffers, shape, &named, None)?;
                        same_tile_plain = Some((dense, times.median()));
                    }
                }
                let ratio = times.median() / plain_times.median();
                if modifies {
                    worst.modifiers = worst.modifiers.max(ratio);
                }
                let same_tile = same_tile_plain.map_or(String::new(), |(dense, median)| {
                    let same = if dense == plain_kernel {
                        ", = plain"
                    } else {
                        ""
                    };
                    format!(
                        ", x{:.3} vs the same tile's dense kernel ({median:.2} us{same})",
                        times.median() / median
                    )
                });
                print_case(
                    &format!("{label} {name}"),
                    kernel,
                    &times,
                    &format!("x{ratio:.3} vs plain{same_tile}"),
                );
            }
        }
    }
    // The sliding window against the causal time scaled by the visible fraction.
    let (batch, heads, seq_len, head_dim) = WINDOW_SHAPE;
    let shape = AttentionShape::new(batch, heads, seq_len, head_dim);
    let buffers = Buffers::<T>::new(&shape)?;
    let causal = ForwardOptions {
        causal: true,
        ..ForwardOptions::default()
    };
    let (causal_times, causal_kernel) = time(gpu, &buffers, shape, &causal, None)?;
    let label = format!("{dtype} {batch},{heads},{seq_len},{head_dim}");
    print_case(&format!("{label} causal"), causal_kernel, &causal_times, "");
    let width = WINDOW.left.unwrap() as usize + 1;
    let fraction = visible_pairs(seq_len, width) as f64 / visible_pairs(seq_len, seq_len) as f64;
    let target = causal_times.median() * fraction;
    for (name, softcap) in [
        ("window 1024", None),
        ("window 1024 + softcap", Some(SOFTCAP)),
    ] {
        let options = ForwardOptions {
            window: Some(WINDOW),
            softcap,
            ..causal
        };
        let (times, kernel) = time(gpu, &buffers, shape, &options, None)?;
        let ratio = times.median() / target;
        if softcap.is_none() {
            worst.window = worst.window.max(ratio);
        }
        print_case(
            &format!("{label} {name}"),
            kernel,
            &times,
            &format!("x{ratio:.3} vs causal x visible fraction {fraction:.4} ({target:.2} us)"),
        );
    }
    Ok(())
}

/// The exposed modified kernels of `T` at `head_dim` that run on `gpu`, as
/// [`FORWARD_KERNELS`] lists them.
fn modified_kernels<T: Element>(
    gpu: &FlashAttention,
    head_dim: usize,
) -> impl Iterator<Item = &'static ForwardKernel> {
    let compute_capability = gpu.compute_capability();
    FORWARD_KERNELS.iter().filter(move |kernel| {
        kernel.spec.variant == Variant::Modified
            && kernel.spec.dtype == T::DTYPE
            && kernel.spec.tile.head_dim == head_dim
            && kernel.runs_on(compute_capability)
    })
}

/// Every modifier on every modified kernel of the anchor shapes' head dims, against the dense
/// kernel of the same tile; then the window on each modified kernel of its head dim.
fn time_every_tile<T: Element>(
    gpu: &FlashAttention,
    only: Option<usize>,
    shape: Option<(usize, usize, usize, usize)>,
) -> Result<(), Error> {
    let dtype = format!("{:?}", T::DTYPE);
    let shapes: Vec<_> = match shape {
        Some(shape) => vec![shape],
        None => ANCHOR_SHAPES
            .into_iter()
            .filter(|&(_, _, _, head_dim)| only.is_none_or(|only| only == head_dim))
            .collect(),
    };
    for (batch, heads, seq_len, head_dim) in shapes {
        let shape = AttentionShape::new(batch, heads, seq_len, head_dim);
        let buffers = Buffers::<T>::new(&shape)?;
        for causal in [false, true] {
            let label = format!("{dtype} {batch},{heads},{seq_len},{head_dim} causal={causal}");
            for modified in modified_kernels::<T>(gpu, head_dim) {
                let plain = ForwardOptions {
                    causal,
                    ..ForwardOptions::default()
                };
                let dense_median = match dense_of(modified) {
                    Some(dense) => {
                        let named = ForwardOptions {
                            kernel: Some(dense),
                            ..plain
                        };
                        let (times, _) = time(gpu, &buffers, shape, &named, None)?;
                        print_case(&format!("{label} tile plain"), dense, &times, "");
                        Some(times.median())
                    }
                    None => None,
                };
                // The tile's single-modifier kernels, where built, with their one modifier.
                let alibi_kernel = twin_of(modified, Variant::Alibi);
                let softcap_kernel = twin_of(modified, Variant::Softcap);
                let cases = [
                    (
                        "tile none on",
                        None,
                        Some(&buffers.zero_slopes),
                        Some(modified),
                    ),
                    ("tile softcap", Some(SOFTCAP), None, Some(modified)),
                    ("tile softcap kernel", Some(SOFTCAP), None, softcap_kernel),
                    ("tile alibi", None, Some(&buffers.slopes), Some(modified)),
                    (
                        "tile alibi kernel",
                        None,
                        Some(&buffers.slopes),
                        alibi_kernel,
                    ),
                    (
                        "tile softcap+alibi",
                        Some(SOFTCAP),
                        Some(&buffers.slopes),
                        Some(modified),
                    ),
                ];
                for (name, softcap, alibi, kernel) in cases {
                    let Some(kernel) = kernel else { continue };
                    let options = ForwardOptions {
                        softcap,
                        kernel: Some(kernel),
                        ..plain
                    };
                    let (times, _) = time(gpu, &buffers, shape, &options, alibi)?;
                    let ratio = dense_median.map_or(String::new(), |median| {
                        format!(
                            "x{:.3} vs the same tile's dense kernel",
                            times.median() / median
                        )
                    });
                    print_case(&format!("{label} {name}"), kernel, &times, &ratio);
                }
            }
        }
    }
    let (batch, heads, seq_len, head_dim) = WINDOW_SHAPE;
    let shape = AttentionShape::new(batch, heads, seq_len, head_dim);
    let buffers = Buffers::<T>::new(&shape)?;
    let label = format!("{dtype} {batch},{heads},{seq_len},{head_dim}");
    for modified in modified_kernels::<T>(gpu, head_dim) {
        let options = ForwardOptions {
            causal: true,
            window: Some(WINDOW),
            kernel: Some(modified),
            ..ForwardOptions::default()
        };
        let (times, _) = time(gpu, &buffers, shape, &options, None)?;
        print_case(&format!("{label} tile window 1024"), modified, &times, "");
    }
    Ok(())
}

/// Query-key pairs that a causal problem of `seq_len` leaves visible under a window of `width`
/// keys (the diagonal and `width - 1` before it): query `i` sees `min(i + 1, width)` keys.
fn visible_pairs(seq_len: usize, width: usize) -> usize {
    (0..seq_len).map(|i| (i + 1).min(width)).sum()
}

/// Query-key pairs in the key blocks that a tile of `block_m` rows by `block_n` keys computes
/// over a causal problem of `seq_len` with a window of `width` keys (the diagonal and
/// `width - 1` before it): per query tile, every key block from the first row's first visible
/// key to the last row's diagonal.
fn computed_pairs(seq_len: usize, width: usize, block_m: usize, block_n: usize) -> usize {
    (0..seq_len.div_ceil(block_m))
        .map(|tile| {
            let first_row = tile * block_m;
            let last_row = (first_row + block_m).min(seq_len) - 1;
            let first_block = (first_row + 1).saturating_sub(width) / block_n;
            let last_block = last_row / block_n;
            (last_block - first_block + 1) * block_n * (last_row - first_row + 1)
        })
        .sum()
}

/// `--window-sweep`: windows of 256 to 8191 keys at the window shape, f16, on each modified
/// kernel of its head dim, against the same tile's dense causal time scaled by the visible
/// fraction (where the build has no dense kernel of that tile, the default API's dense causal
/// kernel's: the reference); beside each ratio, the geometric floor (the fraction of
/// computed pairs that the window leaves visible, against the reference kernel's causal
/// fraction), and the ratio over that floor: what the window costs beyond the pairs it
/// computes.
fn window_sweep(gpu: &FlashAttention) -> Result<(), Error> {
    let (batch, heads, seq_len, head_dim) = WINDOW_SHAPE;
    let shape = AttentionShape::new(batch, heads, seq_len, head_dim);
    let buffers = Buffers::<f16>::new(&shape)?;
    let label = format!("F16 {batch},{heads},{seq_len},{head_dim}");
    let causal = ForwardOptions {
        causal: true,
        ..ForwardOptions::default()
    };
    let causal_pairs = visible_pairs(seq_len, seq_len);
    let table_kernel = plan_on(
        Dtype::F16,
        &shape,
        &causal,
        gpu.sm_count(),
        gpu.compute_capability(),
    )?
    .kernel();
    for modified in modified_kernels::<f16>(gpu, head_dim) {
        let dense = dense_of(modified).unwrap_or(table_kernel);
        let named = ForwardOptions {
            kernel: Some(dense),
            ..causal
        };
        let (causal_times, _) = time(gpu, &buffers, shape, &named, None)?;
        print_case(&format!("{label} causal"), dense, &causal_times, "");
        let reference = dense.spec.tile;
        let causal_computed =
            computed_pairs(seq_len, seq_len, reference.block_m, reference.block_n);
        for width in [256, 512, 1024, 2048, 4096, seq_len - 1] {
            let options = ForwardOptions {
                window: Some(SlidingWindow {
                    left: Some(width as i64 - 1),
                    right: Some(0),
                }),
                kernel: Some(modified),
                ..causal
            };
            let (times, _) = time(gpu, &buffers, shape, &options, None)?;
            let visible = visible_pairs(seq_len, width);
            let fraction = visible as f64 / causal_pairs as f64;
            let ratio = times.median() / (causal_times.median() * fraction);
            let computed = computed_pairs(
                seq_len,
                width,
                modified.spec.key_block_rows(),
                modified.spec.tile.block_n,
            );
            let floor =
                (computed as f64 / visible as f64) / (causal_computed as f64 / causal_pairs as f64);
            print_case(
                &format!("{label} window {width}"),
                modified,
                &times,
                &format!(
                    "x{ratio:.3} vs causal x visible {fraction:.4}; geometric floor x{floor:.3}, \
                     over it x{:.3}",
                    ratio / floor
                ),
            );
        }
    }
    Ok(())
}

/// The `--shape B,H,S,D` argument, if given; panics with `usage` where it is not four sizes.
fn shape_argument(arguments: &[String], usage: &str) -> Option<(usize, usize, usize, usize)> {
    let at = arguments
        .iter()
        .position(|argument| argument == "--shape")?;
    let text = arguments.get(at + 1).map_or("", String::as_str);
    let shape = parse_shape(text)
        .unwrap_or_else(|| panic!("--shape needs four sizes, got {text:?}; {usage}"));
    Some(shape)
}

/// `--profile-launches`: each case of the problem `--shape` and `--causal` name, launched once.
fn launch_each_case_once(gpu: &FlashAttention) -> Result<(), Error> {
    const USAGE: &str =
        "usage: flash-attn-modifier-timing --profile-launches [--shape B,H,S,D] [--causal]";
    let arguments: Vec<String> = std::env::args().collect();
    let (batch, heads, seq_len, head_dim) =
        shape_argument(&arguments, USAGE).unwrap_or((8, 16, 2048, 64));
    let shape = AttentionShape::new(batch, heads, seq_len, head_dim);
    let causal = arguments.iter().any(|argument| argument == "--causal");
    let buffers = Buffers::<f16>::new(&shape)?;
    let plain = ForwardOptions {
        causal,
        ..ForwardOptions::default()
    };
    let capped = ForwardOptions {
        softcap: Some(SOFTCAP),
        ..plain
    };
    let slopes = |slopes: &DeviceBuffer<f32>| RawAlibiSlopes {
        address: slopes.as_device_ptr().as_raw(),
        layout: AlibiLayout::PerHead,
    };
    let stream = gpu.stream().as_inner();
    let tensors = buffers.tensors();
    let (sm_count, compute_capability) = (gpu.sm_count(), gpu.compute_capability());
    let none_on = ForwardOptions {
        kernel: Some(modified_kernel_on(
            Dtype::F16,
            &shape,
            causal,
            sm_count,
            compute_capability,
        )?),
        ..plain
    };
    // SAFETY: as in `time`; synchronised before the buffers go.
    unsafe {
        gpu.forward_raw(stream, Dtype::F16, tensors, shape, &plain)?;
        let zero = slopes(&buffers.zero_slopes);
        gpu.forward_alibi_raw(stream, Dtype::F16, tensors, zero, shape, &none_on)?;
        gpu.forward_raw(stream, Dtype::F16, tensors, shape, &capped)?;
        let bloom = slopes(&buffers.slopes);
        gpu.forward_alibi_raw(stream, Dtype::F16, tensors, bloom, shape, &plain)?;
        gpu.forward_alibi_raw(stream, Dtype::F16, tensors, bloom, shape, &capped)?;
        if causal {
            let window = ForwardOptions {
                window: Some(WINDOW),
                ..plain
            };
            gpu.forward_raw(stream, Dtype::F16, tensors, shape, &window)?;
        }
    }
    gpu.synchronize()
}

fn main() -> Result<(), Error> {
    let gpu = FlashAttention::new()?;
    if std::env::args().any(|argument| argument == "--profile-launches") {
        return launch_each_case_once(&gpu);
    }
    if std::env::args().any(|argument| argument == "--window-sweep") {
        return window_sweep(&gpu);
    }
    println!("score modifiers on {}", gpu.device_name());
    println!(
        "{:<34} {:<38} {:>9} {:>19} ratios",
        "case", "kernel", "median us", "p10-p90 us"
    );
    let arguments: Vec<String> = std::env::args().collect();
    // `--every-tile --head-dim D`: only the tiles of head dim D, without the targets' run.
    let only = arguments
        .iter()
        .position(|argument| argument == "--head-dim")
        .map(|at| {
            let value = arguments.get(at + 1).and_then(|text| text.parse().ok());
            value.unwrap_or_else(|| panic!("--head-dim needs a head dim"))
        });
    // `--every-tile --shape B,H,S,D`: that shape instead of the anchors, without the targets'.
    let shape = shape_argument(
        &arguments,
        "usage: flash-attn-modifier-timing --every-tile [--head-dim D | --shape B,H,S,D]",
    );
    let targets = only.is_none() && shape.is_none();
    let mut worst = Worst::default();
    if targets {
        time_dtype::<f16>(&gpu, &mut worst)?;
        time_dtype::<bf16>(&gpu, &mut worst)?;
    }
    if arguments.iter().any(|argument| argument == "--every-tile") {
        time_every_tile::<f16>(&gpu, only, shape)?;
        time_every_tile::<bf16>(&gpu, only, shape)?;
    }
    if !targets {
        return Ok(());
    }
    let verdict = |met: bool| if met { "met" } else { "MISSED" };
    println!(
        "softcap and ALiBi: worst x{:.3} vs plain at the anchor shapes (target <= x{MODIFIER_BOUND}): {}",
        worst.modifiers,
        verdict(worst.modifiers <= MODIFIER_BOUND)
    );
    println!(
        "sliding window 1024 at S=8192, D=128, causal: worst x{:.3} vs the scaled causal time (target <= x{WINDOW_BOUND}): {}",
        worst.window,
        verdict(worst.window <= WINDOW_BOUND)
    );
    Ok(())
}
