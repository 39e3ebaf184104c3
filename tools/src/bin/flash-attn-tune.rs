//! The autotuner: validates and screens every exposed configuration on a sweep of shapes, times
//! the best of each group in full, re-times each group's winner against its runner-up, and
//! writes the dispatch table that the default API uses.
//!
//! With `--family sm80` (the default) it screens the sm80 family's kernels and writes the main
//! table (`host/dispatch-table.tsv`), which serves every device; with `--family sm90`, on a
//! device of compute capability 9.0, every kernel the device runs, and writes the sm_90a table
//! (`host/dispatch-table-sm90a.tsv`): a row where an sm90 kernel wins, none where an sm80 one
//! does, so that the device falls back to the main table there.
//!
//! It searches the whole space, so it needs a build of it: `FLASH_ATTN_KERNELS=all` at build
//! time (`scripts/build-bundle.sh` builds the bundle so). A default build holds only the
//! shipping set, the kernels the current table names, and the tuner refuses to run on it.
//!
//! `flash-attn-tune [--out DIR] [--quick] [--write-table PATH] [--seed N] [--head-dims D,..]
//! [--masking non-causal|causal] [--family sm80|sm90]`,
//! or, without a GPU,
//! `flash-attn-tune --reset-table PATH` or `flash-attn-tune --replot-from PATH [--out DIR]`.
//!
//! For each element type (fp16, bf16), head dim (every kernel head dim, or those of
//! `--head-dims`: the table keeps its other tuned entries), masking (off and on, or the one of
//! `--masking`: a D=128 tuning of both takes ~1000 s, more than one device call) and shape of the
//! sweep (`tuning::sweep_shapes`: a small-grid and a large-grid shape per key-length bucket, for
//! the device's multiprocessor count), each configuration of that element type and head dim is
//! first validated (fresh random inputs, output poisoned with NaN, every output element finite,
//! sampled rows against the f64 reference within the GPU tests' tolerance) and, if correct,
//! screened: timed with CUDA events over a few repeats. Per dispatch group (head dim, element
//! type, masking, key-length bucket, grid size) the best `FINALISTS` of the screening are timed
//! again in full (warm-up, then repeats of back-to-back launches; median and 95% bootstrap
//! interval), and the one with the lowest mean time relative to the fastest wins; winner and
//! runner-up are re-timed interleaved on the group's first shape, and the win counts only if a
//! Mann-Whitney test rejects at 5%.
//!
//! Writes `tuning.json` (the finalists), `screening.json` (every configuration), `tuning.svg`
//! (the finalists' times), `table.txt` (both rankings) and `dispatch-table.tsv` to DIR (default
//! `target/tuning`); with `--write-table`, also the table's data file there (normally
//! `host/dispatch-table.tsv`). Exits 1 if any configuration failed validation.
//!
//! `--reset-table PATH` writes the untuned table (every entry the fallback kernel of its
//! element type and head dim) and exits: for after a change to the kernel list, until the
//! tuner runs on a GPU again.
//!
//! `--replot-from PATH` reads the measurements of a `tuning.json` written by this tool and
//! writes their `tuning.svg` to DIR again, drawn by the same code, and exits.

use std::io::{IsTerminal, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use cust::memory::{CopyDestination, DeviceBuffer};
use flash_attn::reference::{
    attention_rows, error_stats, random_normal, within_tolerance, ErrorStats, Precision, QueryRow,
    ReferenceOutput, ABSOLUTE_TOLERANCE,
};
use flash_attn::{
    dispatch_table, dispatch_table_sm90a, ptx_target_for, AttentionShape, Dtype, Element, Error,
    Family, FlashAttention, ForwardKernel, ForwardOptions, GridSize, KernelSet, Variant,
    FORWARD_KERNELS, KERNEL_SET, NOT_TUNED, SUPPORTED_HEAD_DIMS,
};
use flash_attn_tools::timing::{time_launches, LaunchTimes};
use flash_attn_tools::tuning::{
    confirmation_report, group_rankings, groups, measurements_from_json, ranked_tables,
    render_dispatch_table, render_sm90a_dispatch_table, sample_rows, sweep_shapes, table_report,
    to_json, to_svg, updated_sm90a_table, updated_table, utc_date, Confirmation, GroupKey,
    Measurement, Timing, TuningRun, Validation, CONFIRMATION_ALPHA, DTYPES,
};
use half::{bf16, f16};

const USAGE: &str =
    "usage: flash-attn-tune [--out DIR] [--quick] [--write-table PATH] [--seed N] [--head-dims D,..]\n\
     \x20                      [--masking non-causal|causal] [--family sm80|sm90]\n\
     \x20      flash-attn-tune --reset-table PATH\n\
     \x20      flash-attn-tune --replot-from PATH [--out DIR]\n\
     \x20 --out DIR          where tuning.json, tuning.svg, table.txt and dispatch-table.tsv go\n\
     \x20                    (default target/tuning)\n\
     \x20 --quick            fewer repeats: a smoke run, not a tuning\n\
     \x20 --write-table PATH also write the dispatch table there (from a checkout:\n\
     \x20                    host/dispatch-table.tsv)\n\
     \x20 --seed N           replay the validation inputs of an earlier run\n\
     \x20 --head-dims D,..   tune only these kernel head dims (the table keeps the others' entries)\n\
     \x20 --masking M        tune only non-causal or only causal problems (the table keeps the\n\
     \x20                    other masking's entries)\n\
     \x20 --family F         sm80 (default): the sm80 family's kernels, for the main table, which\n\
     \x20                    serves every device; sm90 (compute capability 9.0 only): both\n\
     \x20                    families' kernels, for the sm_90a table: a row where an sm90 kernel\n\
     \x20                    wins, none where an sm80 one does (host/dispatch-table-sm90a.tsv)\n\
     \x20 --reset-table PATH write the untuned table there and exit (no GPU needed)\n\
     \x20 --replot-from PATH redraw DIR/tuning.svg from that run's tuning.json and exit (no GPU\n\
     \x20                    needed)";

/// Query rows per problem checked against the f64 reference: a full reference at S = 4096
/// would take minutes, and every output element is still checked for NaN (unwritten rows).
const VALIDATION_ROWS: usize = 64;

/// Work per timed repeat: about a millisecond at 200 TFLOP/s, far above the events'
/// resolution (~0.5 us) and the launch gaps, and short enough for a sweep of minutes.
const REPEAT_FLOP: f64 = 2e11;

/// Repeats of the screening of every configuration, of the finalists' timing and of each side
/// of a confirmation.
#[derive(Clone, Copy)]
struct Repeats {
    screen: usize,
    sweep: usize,
    confirmation: usize,
}

const FULL: Repeats = Repeats {
    screen: 3,
    sweep: 25,
    confirmation: 40,
};
const QUICK: Repeats = Repeats {
    screen: 2,
    sweep: 6,
    confirmation: 10,
};

/// Configurations per group that the screening sends on to the full timing. With 266 kernels
/// the full timing of all of them would take ~10 minutes on an H100. In the run of 2026-11-22
/// (bundle 18e044e) the winner of each group's full timing had ranked first in the screening in
/// 71 of 96 groups, second in 19 and third to fifth in the other 6: none needed the sixth place.
const FINALISTS: usize = 6;

struct Args {
    out: PathBuf,
    quick: bool,
    write_table: Option<PathBuf>,
    seed: Option<u64>,
    reset_table: Option<PathBuf>,
    replot_from: Option<PathBuf>,
    /// The kernel head dims to tune: all of them by default.
    head_dims: Vec<usize>,
    /// The maskings to tune (`causal` values): both by default.
    maskings: Vec<bool>,
    /// The family whose table the run writes: [`Family::Sm80`] by default.
    family: Family,
}

/// The parsed arguments; `Ok(None)` for `--help`.
fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut parsed = Args {
        out: PathBuf::from("target/tuning"),
        quick: false,
        write_table: None,
        seed: None,
        reset_table: None,
        replot_from: None,
        head_dims: SUPPORTED_HEAD_DIMS.to_vec(),
        maskings: vec![false, true],
        family: Family::Sm80,
    };
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--out" => parsed.out = value("--out")?.into(),
            "--quick" => parsed.quick = true,
            "--write-table" => parsed.write_table = Some(value("--write-table")?.into()),
            "--reset-table" => parsed.reset_table = Some(value("--reset-table")?.into()),
            "--replot-from" => parsed.replot_from = Some(value("--replot-from")?.into()),
            "--seed" => {
                let seed = value("--seed")?;
                parsed.seed = Some(seed.parse().map_err(|_| format!("bad seed {seed:?}"))?);
            }
            "--head-dims" => {
                let list = value("--head-dims")?;
                parsed.head_dims = list
                    .split(',')
                    .map(|d| match d.parse() {
                        Ok(d) if SUPPORTED_HEAD_DIMS.contains(&d) => Ok(d),
                        _ => Err(format!(
                            "--head-dims {list:?}: each must be one of {SUPPORTED_HEAD_DIMS:?}"
                        )),
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--masking" => {
                parsed.maskings = match value("--masking")?.as_str() {
                    "non-causal" => vec![false],
                    "causal" => vec![true],
                    other => {
                        return Err(format!("--masking {other:?}: must be non-causal or causal"))
                    }
                };
            }
            "--family" => {
                parsed.family = match value("--family")?.as_str() {
                    "sm80" => Family::Sm80,
                    "sm90" => Family::Sm90,
                    other => return Err(format!("--family {other:?}: must be sm80 or sm90")),
                };
            }
            "--help" | "-h" => return Ok(None),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Some(parsed))
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("flash-attn-tune: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if let Some(path) = &args.reset_table {
        let untuned = updated_table(&[], &[], NOT_TUNED);
        return match write_file(path, &render_dispatch_table(&untuned)) {
            Ok(()) => {
                println!("wrote the untuned dispatch table to {}", path.display());
                ExitCode::SUCCESS
            }
            Err(message) => {
                eprintln!("flash-attn-tune: {message}");
                ExitCode::FAILURE
            }
        };
    }
    if let Some(path) = &args.replot_from {
        return match replot(path, &args.out) {
            Ok(svg) => {
                println!("wrote {}", svg.display());
                ExitCode::SUCCESS
            }
            Err(message) => {
                eprintln!("flash-attn-tune: {message}");
                ExitCode::FAILURE
            }
        };
    }
    match run(&args) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(failed) => {
            eprintln!(
                "flash-attn-tune: {failed} configuration runs FAILED validation (marked FAILED \
                 above); they were excluded from the table"
            );
            ExitCode::FAILURE
        }
        Err(message) => {
            eprintln!("flash-attn-tune: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Launches per timed repeat for about [`REPEAT_FLOP`] of work, at least one.
fn launches_per_repeat(shape: &AttentionShape, causal: bool) -> usize {
    (REPEAT_FLOP / shape.flops(causal)).ceil().max(1.0) as usize
}

/// Prints the report as it grows and keeps it for `table.txt`.
#[derive(Default)]
struct Report {
    text: String,
}

impl Report {
    fn add(&mut self, text: &str) {
        print!("{text}");
        self.text.push_str(text);
    }
}

/// A progress bar on stderr, redrawn in place on a terminal and one line per step otherwise.
struct Progress {
    done: usize,
    total: usize,
    terminal: bool,
}

impl Progress {
    const WIDTH: usize = 30;

    fn new(total: usize) -> Self {
        Self {
            done: 0,
            total,
            terminal: std::io::stderr().is_terminal(),
        }
    }

    fn show(&self, label: &str) {
        let filled = self.done * Self::WIDTH / self.total.max(1);
        let line = format!(
            "[{}{}] {}/{} {label}",
            "#".repeat(filled),
            ".".repeat(Self::WIDTH - filled),
            self.done,
            self.total
        );
        if self.terminal {
            // `\x1b[K` clears what a longer previous line left behind.
            eprint!("\r{line}\x1b[K");
            let _ = std::io::stderr().flush();
        } else {
            eprintln!("{line}");
        }
    }

    fn advance(&mut self) {
        self.done += 1;
    }

    fn finish(&self) {
        self.show("done");
        if self.terminal {
            eprintln!();
        }
    }
}

/// The result of a scoped thread, whose panic (none is expected) carries on in the caller.
fn join<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// Random dense `[B, H, S, D]` inputs of mean 0.5 and unit spread on the host.
struct HostInputs<T> {
    q: Vec<T>,
    k: Vec<T>,
    v: Vec<T>,
}

impl<T: Element> HostInputs<T> {
    fn random(shape: &AttentionShape, seed: u64) -> Self {
        // The tuner's own sweep shapes, far below usize.
        let (q_elements, kv_elements) = (
            shape.q_elements().expect("a sweep shape fits"),
            shape.kv_elements().expect("a sweep shape fits"),
        );
        // The three tensors in parallel: the largest problem's hold 10^8 elements together.
        std::thread::scope(|scope| {
            let q = scope.spawn(|| random_normal::<T>(q_elements, 0.5, 1.0, seed));
            let k = scope.spawn(|| random_normal::<T>(kv_elements, 0.5, 1.0, seed ^ 0x5555));
            let v = random_normal::<T>(kv_elements, 0.5, 1.0, seed ^ 0xAAAA);
            Self {
                q: join(q),
                k: join(k),
                v,
            }
        })
    }
}

/// One problem on the GPU: inputs and an output buffer.
struct DeviceProblem<T: Element> {
    shape: AttentionShape,
    q: DeviceBuffer<T>,
    k: DeviceBuffer<T>,
    v: DeviceBuffer<T>,
    output: DeviceBuffer<T>,
}

impl<T: Element> DeviceProblem<T> {
    fn upload(shape: AttentionShape, inputs: &HostInputs<T>) -> Result<Self, Error> {
        Ok(Self {
            shape,
            q: DeviceBuffer::from_slice(&inputs.q)?,
            k: DeviceBuffer::from_slice(&inputs.k)?,
            v: DeviceBuffer::from_slice(&inputs.v)?,
            output: DeviceBuffer::from_slice(&vec![T::from_f64(0.0); inputs.q.len()])?,
        })
    }

    fn launch(&mut self, gpu: &FlashAttention, options: &ForwardOptions) -> Result<(), Error> {
        gpu.forward(
            &self.q,
            &self.k,
            &self.v,
            &mut self.output,
            None,
            self.shape,
            options,
        )
    }

    /// Times `options`' kernel over `repeats` repeats, after two repeats' worth of untimed
    /// launches if `warm_up`.
    fn time(
        &mut self,
        gpu: &FlashAttention,
        options: &ForwardOptions,
        warm_up: bool,
        repeats: usize,
    ) -> Result<LaunchTimes, Error> {
        let launches = launches_per_repeat(&self.shape, options.causal);
        let warm_up = if warm_up { 2 * launches } else { 0 };
        time_launches(gpu.stream(), warm_up, repeats, launches, || {
            self.launch(gpu, options)
        })
    }
}

/// The f64 reference of a problem's sampled rows, and the error a plain 16-bit implementation
/// makes on them (the yardstick of the tolerance).
struct RowReference {
    rows: Vec<QueryRow>,
    reference: ReferenceOutput,
    plain: ErrorStats,
}

impl RowReference {
    fn new<T: Element>(
        inputs: &HostInputs<T>,
        shape: AttentionShape,
        causal: bool,
        seed: u64,
    ) -> Self {
        let rows = sample_rows(&shape, VALIDATION_ROWS, seed);
        // The kernel receives the scale as f32: the reference uses that same value.
        let scale = shape.default_softmax_scale() as f64;
        let reference_at = |precision| {
            let (q, k, v) = (&inputs.q, &inputs.k, &inputs.v);
            attention_rows(q, k, v, shape, scale, causal, precision, &rows)
        };
        // The two precisions in parallel: at S = 4096 each takes a good fraction of a second.
        let (reference, plain_output) = std::thread::scope(|scope| {
            let plain = scope.spawn(|| reference_at(Precision::Plain(T::DTYPE)).output);
            (reference_at(Precision::F64), join(plain))
        });
        let plain = error_stats(plain_output, &reference.output);
        Self {
            rows,
            reference,
            plain,
        }
    }
}

/// Runs `options`' kernel on a NaN-poisoned output and checks it: every element finite (an
/// element never written stays NaN), and the sampled rows within the GPU tests' tolerance.
fn validate<T: Element>(
    gpu: &FlashAttention,
    problem: &mut DeviceProblem<T>,
    options: &ForwardOptions,
    reference: &RowReference,
    poison: &[T],
) -> Result<Validation, Error> {
    problem.output.copy_from(poison)?;
    problem.launch(gpu, options)?;
    gpu.synchronize()?;
    let mut output = poison.to_vec();
    problem.output.copy_to(&mut output[..])?;
    let non_finite = output.iter().filter(|x| !x.to_f64().is_finite()).count();
    if non_finite > 0 {
        return Ok(Validation::Failed(format!(
            "{non_finite} of {} output elements are NaN or infinite (never written, or overflowed)",
            output.len()
        )));
    }
    let d = problem.shape.head_dim;
    let sampled = reference.rows.iter().flat_map(|row| {
        let start = row.index(&problem.shape) * d;
        output[start..start + d].iter().map(|x| x.to_f64())
    });
    let (ours, plain) = (
        error_stats(sampled, &reference.reference.output),
        reference.plain,
    );
    Ok(if within_tolerance(&ours, &plain) {
        Validation::Passed { ours, plain }
    } else {
        Validation::Failed(format!(
            "error beyond tolerance on {} sampled rows: max {:.2e}, mean {:.2e}; allowed 2x the \
             plain 16-bit error ({:.2e}, {:.2e}) + {ABSOLUTE_TOLERANCE:.1e}",
            reference.rows.len(),
            ours.max_abs,
            ours.mean_abs,
            plain.max_abs,
            plain.mean_abs
        ))
    })
}

/// The exposed kernels of one element type and head dim, each timed on every shape of the sweep.
struct KernelPool {
    dtype: Dtype,
    head_dim: usize,
    candidates: Vec<&'static ForwardKernel>,
}

/// Validates and times every candidate of `pool` on `shape` with each masking (`causal` value)
/// of `maskings`.
fn sweep_shape<T: Element>(
    gpu: &FlashAttention,
    pool: &KernelPool,
    shape: AttentionShape,
    maskings: &[bool],
    (repeats, seed): (usize, u64),
    progress: &mut Progress,
    measurements: &mut Vec<Measurement>,
) -> Result<(), Error> {
    let inputs = HostInputs::<T>::random(&shape, seed);
    let mut problem = DeviceProblem::upload(shape, &inputs)?;
    let poison = vec![T::from_f64(f64::NAN); inputs.q.len()];
    for &causal in maskings {
        let reference = RowReference::new(&inputs, shape, causal, seed ^ causal as u64);
        for &kernel in &pool.candidates {
            progress.show(&format!(
                "{} D={} {} B,H,S={},{},{} {}",
                pool.dtype.name(),
                pool.head_dim,
                if causal { "causal" } else { "non-causal" },
                shape.batch,
                shape.heads_q,
                shape.seq_len_q,
                kernel.entry
            ));
            let options = ForwardOptions {
                causal,
                kernel: Some(kernel),
                ..Default::default()
            };
            let validation = validate(gpu, &mut problem, &options, &reference, &poison)?;
            let timing = match validation {
                Validation::Passed { .. } => {
                    Timing::new(problem.time(gpu, &options, true, repeats)?)
                }
                Validation::Failed(_) => None,
            };
            measurements.push(Measurement {
                kernel,
                shape,
                causal,
                grid: GridSize::of(&shape, gpu.sm_count()),
                validation,
                timing,
            });
            progress.advance();
        }
    }
    Ok(())
}

/// Times each finalist of a group on `shape` with the full repeats, on fresh inputs (the
/// screening validated them), and records it with the screening's validation.
#[allow(clippy::too_many_arguments)]
fn time_finalists<T: Element>(
    gpu: &FlashAttention,
    shape: AttentionShape,
    causal: bool,
    finalists: &[&'static ForwardKernel],
    screening: &[Measurement],
    (repeats, seed): (usize, u64),
    progress: &mut Progress,
    measurements: &mut Vec<Measurement>,
) -> Result<(), Error> {
    let mut problem = DeviceProblem::upload(shape, &HostInputs::<T>::random(&shape, seed))?;
    for &kernel in finalists {
        let screened = screening
            .iter()
            .find(|m| m.kernel == kernel && m.shape == shape && m.causal == causal)
            .expect("a finalist was screened on every shape of its group");
        progress.show(&format!(
            "final {} B,H,S={},{},{}",
            kernel.entry, shape.batch, shape.heads_q, shape.seq_len_q
        ));
        let options = ForwardOptions {
            causal,
            kernel: Some(kernel),
            ..Default::default()
        };
        let timing = Timing::new(problem.time(gpu, &options, true, repeats)?);
        measurements.push(Measurement {
            timing,
            ..screened.clone()
        });
        progress.advance();
    }
    Ok(())
}

/// Re-times `winner` and `runner_up` on fresh inputs of `shape`: both warmed up, then one
/// repeat of each in turn, so that drift in clocks or temperature falls on both alike.
fn confirm<T: Element>(
    gpu: &FlashAttention,
    key: GroupKey,
    shape: AttentionShape,
    (winner, runner_up): (&'static ForwardKernel, &'static ForwardKernel),
    (repeats, seed): (usize, u64),
) -> Result<Option<Confirmation>, Error> {
    let mut problem = DeviceProblem::upload(shape, &HostInputs::<T>::random(&shape, seed))?;
    let options = |kernel| ForwardOptions {
        causal: key.causal,
        kernel: Some(kernel),
        ..Default::default()
    };
    let (winner_options, runner_up_options) = (options(winner), options(runner_up));
    problem.time(gpu, &winner_options, true, 1)?;
    problem.time(gpu, &runner_up_options, true, 1)?;
    let (mut winner_us, mut runner_up_us) = (Vec::new(), Vec::new());
    for _ in 0..repeats {
        winner_us.push(problem.time(gpu, &winner_options, false, 1)?.median());
        runner_up_us.push(problem.time(gpu, &runner_up_options, false, 1)?.median());
    }
    Ok(Confirmation::new(
        key,
        shape,
        (winner, winner_us),
        (runner_up, runner_up_us),
    ))
}

/// A seed from the clock, different on every run.
fn time_seed() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    (nanos as u64) ^ (nanos >> 64) as u64
}

fn write_file(path: &Path, contents: &str) -> Result<(), String> {
    std::fs::write(path, contents).map_err(|error| format!("writing {}: {error}", path.display()))
}

/// Draws `out/tuning.svg` from the measurements of the `tuning.json` at `json`; returns the
/// SVG's path.
fn replot(json: &Path, out: &Path) -> Result<PathBuf, String> {
    let text = std::fs::read_to_string(json)
        .map_err(|error| format!("reading {}: {error}", json.display()))?;
    let measurements =
        measurements_from_json(&text).map_err(|error| format!("{}: {error}", json.display()))?;
    std::fs::create_dir_all(out).map_err(|error| format!("creating {}: {error}", out.display()))?;
    let svg = out.join("tuning.svg");
    write_file(&svg, &to_svg(&measurements))?;
    Ok(svg)
}

/// The whole run; returns how many (shape, configuration) runs failed validation.
fn run(args: &Args) -> Result<usize, String> {
    // The tuner searches the space: a default build holds only the kernels the current table
    // names, and tuning over those alone could never move the table to another kernel.
    if KERNEL_SET != KernelSet::All {
        return Err(format!(
            "this build holds only the {KERNEL_SET:?} set ({} kernels): build the tuner with \
             FLASH_ATTN_KERNELS=all to search every configuration (scripts/build-bundle.sh does)",
            FORWARD_KERNELS.len()
        ));
    }
    let gpu = FlashAttention::new().map_err(|error| format!("no usable GPU: {error}"))?;
    if ptx_target_for(args.family, gpu.compute_capability()).is_none() {
        return Err(format!(
            "{} cannot run the {:?} family's kernels (compute capability {:?})",
            gpu.device_name(),
            args.family,
            gpu.compute_capability()
        ));
    }
    let gpu_error = |error: Error| format!("CUDA failure, stopping: {error}");
    let repeats = if args.quick { QUICK } else { FULL };
    let seed = args.seed.unwrap_or_else(time_seed);
    let date = utc_date(SystemTime::now());
    std::fs::create_dir_all(&args.out)
        .map_err(|error| format!("creating {}: {error}", args.out.display()))?;
    let mut report = Report::default();
    report.add(&format!(
        "flash-attn-tune on {} ({} SMs), {date}, inputs seed {seed} (replay with --seed \
         {seed}){}\n",
        gpu.device_name(),
        gpu.sm_count(),
        if args.quick { ", QUICK run" } else { "" }
    ));

    let pools: Vec<KernelPool> = DTYPES
        .into_iter()
        .flat_map(|dtype| args.head_dims.iter().map(move |&d| (dtype, d)))
        .map(|(dtype, head_dim)| KernelPool {
            dtype,
            head_dim,
            // For the main table, which serves every device, the sm80 family's kernels; for the
            // sm_90a table every kernel this device runs, so that a row goes to the sm90 family
            // only where it beats the sm80 one.
            candidates: FORWARD_KERNELS
                .iter()
                .filter(|k| match args.family {
                    Family::Sm80 => k.spec.family == Family::Sm80,
                    Family::Sm90 => k.runs_on(gpu.compute_capability()),
                })
                .filter(|k| k.spec.variant == Variant::Dense)
                .filter(|k| k.spec.dtype == dtype && k.spec.tile.head_dim == head_dim)
                .collect(),
        })
        .collect();
    let runs: usize = pools
        .iter()
        .map(|pool| {
            pool.candidates.len()
                * sweep_shapes(pool.head_dim, gpu.sm_count()).len()
                * args.maskings.len()
        })
        .sum();
    let mut progress = Progress::new(runs);
    let mut screening = Vec::with_capacity(runs);
    let mut problem_seed = seed;
    for pool in &pools {
        for shape in sweep_shapes(pool.head_dim, gpu.sm_count()) {
            problem_seed = problem_seed.wrapping_add(1);
            let settings = (repeats.screen, problem_seed);
            match pool.dtype {
                Dtype::F16 => sweep_shape::<f16>(
                    &gpu,
                    pool,
                    shape,
                    &args.maskings,
                    settings,
                    &mut progress,
                    &mut screening,
                ),
                Dtype::Bf16 => sweep_shape::<bf16>(
                    &gpu,
                    pool,
                    shape,
                    &args.maskings,
                    settings,
                    &mut progress,
                    &mut screening,
                ),
            }
            .map_err(gpu_error)?;
        }
    }
    progress.finish();
    report.add(&format!(
        "\n=== Screening: every configuration validated, then its median us per launch over {} \
         repeats ===\n",
        repeats.screen
    ));
    report.add(&ranked_tables(&screening));

    // The finalists: each group's best FINALISTS of the screening, timed in full on each of
    // the group's shapes. Configurations that failed validation stay in the measurements, so
    // that the report lists them and the exit status counts them.
    let finals: Vec<(GroupKey, Vec<AttentionShape>, Vec<&'static ForwardKernel>)> =
        groups(&screening)
            .iter()
            .map(|group| {
                let finalists = group
                    .ranking()
                    .iter()
                    .take(FINALISTS)
                    .map(|ranked| ranked.kernel)
                    .collect();
                (group.key, group.shapes.clone(), finalists)
            })
            .collect();
    let final_runs = finals
        .iter()
        .map(|(_, shapes, finalists)| shapes.len() * finalists.len())
        .sum();
    let mut progress = Progress::new(final_runs);
    let mut measurements: Vec<Measurement> = screening
        .iter()
        .filter(|m| matches!(m.validation, Validation::Failed(_)))
        .cloned()
        .collect();
    for (key, shapes, finalists) in &finals {
        for &shape in shapes {
            problem_seed = problem_seed.wrapping_add(1);
            let settings = (repeats.sweep, problem_seed);
            match key.dtype {
                Dtype::F16 => time_finalists::<f16>(
                    &gpu,
                    shape,
                    key.causal,
                    finalists,
                    &screening,
                    settings,
                    &mut progress,
                    &mut measurements,
                ),
                Dtype::Bf16 => time_finalists::<bf16>(
                    &gpu,
                    shape,
                    key.causal,
                    finalists,
                    &screening,
                    settings,
                    &mut progress,
                    &mut measurements,
                ),
            }
            .map_err(gpu_error)?;
        }
    }
    progress.finish();

    report.add(&format!(
        "\n=== Finalists (the best {FINALISTS} of each group's screening): median us per launch \
         over {} repeats ===\n",
        repeats.sweep
    ));
    report.add(&ranked_tables(&measurements));
    let failed: Vec<&Measurement> = measurements
        .iter()
        .filter(|m| matches!(m.validation, Validation::Failed(_)))
        .collect();
    if !failed.is_empty() {
        report.add(&format!(
            "\n!!! {} configuration runs FAILED validation and are excluded:\n",
            failed.len()
        ));
        for m in &failed {
            report.add(&format!(
                "!!!   {} causal={} B,H,S,D={},{},{},{}\n",
                m.kernel.entry,
                m.causal,
                m.shape.batch,
                m.shape.heads_q,
                m.shape.seq_len_q,
                m.shape.head_dim
            ));
        }
    }

    let groups = groups(&measurements);
    report.add("\n=== Groups: mean time relative to the fastest, over the group's shapes ===\n");
    report.add(&group_rankings(&groups));

    // The table this run updates, and what the default API runs today for each key on this
    // device: for the sm_90a table its row, else the main table's.
    let current = match args.family {
        Family::Sm80 => dispatch_table(),
        Family::Sm90 => dispatch_table_sm90a(),
    };
    let mut confirmations = Vec::new();
    let mut decisions = Vec::new();
    for group in &groups {
        let ranking = group.ranking();
        let current_kernel = current
            .iter()
            .chain(dispatch_table())
            .find(|entry| group.key.matches(entry))
            .map(|entry| entry.kernel);
        let confirmation = match (ranking.first(), ranking.get(1), group.representative()) {
            (Some(winner), Some(runner_up), Some(shape)) => {
                let pair = (winner.kernel, runner_up.kernel);
                problem_seed = problem_seed.wrapping_add(1);
                let settings = (repeats.confirmation, problem_seed);
                match group.key.dtype {
                    Dtype::F16 => confirm::<f16>(&gpu, group.key, shape, pair, settings),
                    Dtype::Bf16 => confirm::<bf16>(&gpu, group.key, shape, pair, settings),
                }
                .map_err(gpu_error)?
            }
            _ => None,
        };
        match group.decide(confirmation.as_ref(), current_kernel) {
            Some(decision) => decisions.push(decision),
            None => report.add(&format!(
                "\n!!! {}: no configuration passed validation at every shape; its table entry \
                 is kept\n",
                group.key.label()
            )),
        }
        confirmations.extend(confirmation);
    }
    report.add(&format!(
        "\n=== Confirmation: winner and runner-up re-timed, interleaved, on each group's first \
         shape; a win needs p < {} ===\n",
        CONFIRMATION_ALPHA
    ));
    report.add(&confirmation_report(&confirmations));

    // The entries live in the table for the rest of the process: leaking one string is the
    // simplest way to give them the `&'static str` the compiled table has.
    let measured_on: &'static str = format!(
        "{date}, {}{}",
        gpu.device_name(),
        if args.quick { " (quick run)" } else { "" }
    )
    .leak();
    let (table, table_file) = match args.family {
        Family::Sm80 => {
            let table = updated_table(current, &decisions, measured_on);
            let file = render_dispatch_table(&table);
            (table, file)
        }
        Family::Sm90 => {
            let table = updated_sm90a_table(current, &decisions, measured_on);
            let file = render_sm90a_dispatch_table(&table);
            (table, file)
        }
    };
    report.add("\n=== Dispatch table ===\n");
    report.add(&table_report(&table));

    let run = TuningRun {
        device: gpu.device_name(),
        sm_count: gpu.sm_count(),
        date: &date,
        seed,
        quick: args.quick,
        measurements: &measurements,
        confirmations: &confirmations,
        table: &table,
    };
    write_file(&args.out.join("tuning.json"), &to_json(&run))?;
    let screening_run = TuningRun {
        measurements: &screening,
        confirmations: &[],
        ..run
    };
    write_file(&args.out.join("screening.json"), &to_json(&screening_run))?;
    write_file(&args.out.join("tuning.svg"), &to_svg(&measurements))?;
    write_file(&args.out.join("table.txt"), &report.text)?;
    write_file(&args.out.join("dispatch-table.tsv"), &table_file)?;
    println!(
        "\nwrote tuning.json, screening.json, tuning.svg, table.txt and dispatch-table.tsv to {}",
        args.out.display()
    );
    if let Some(path) = &args.write_table {
        write_file(path, &table_file)?;
        println!("wrote the dispatch table to {}", path.display());
    }
    Ok(failed.len())
}
