//! What a tuner run reports: the ranked tables, the confirmation stage and the dispatch table as
//! text, everything as JSON (serde_json), and a plot of each configuration's time relative to
//! the best as SVG (plotters).

use std::fmt::Write;

use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use flash_attn::{AttentionShape, DispatchEntry};

use crate::timing::rounded;

use super::{ratio_to_best, Confirmation, Group, Measurement, Validation};

/// Everything a tuner run produced, for [`to_json`].
#[derive(Clone, Copy, Debug)]
pub struct TuningRun<'a> {
    pub device: &'a str,
    /// The device's multiprocessors, which the measurements' grid sizes are relative to.
    pub sm_count: usize,
    /// `YYYY-MM-DD`.
    pub date: &'a str,
    /// The seed of the validation inputs (`--seed` replays them).
    pub seed: u64,
    pub quick: bool,
    pub measurements: &'a [Measurement],
    pub confirmations: &'a [Confirmation],
    pub table: &'a [DispatchEntry],
}

fn shape_label(shape: &AttentionShape) -> String {
    format!("{},{},{}", shape.batch, shape.heads_q, shape.seq_len_q)
}

fn causal_label(causal: bool) -> &'static str {
    if causal {
        "causal"
    } else {
        "non-causal"
    }
}

/// The problems of `measurements` (element type, shape, masking), each once, in the order
/// first met; with the measurements of each.
fn by_problem(measurements: &[Measurement]) -> Vec<Vec<&Measurement>> {
    let mut problems: Vec<Vec<&Measurement>> = Vec::new();
    for measurement in measurements {
        match problems
            .iter_mut()
            .find(|problem| problem[0].same_problem(measurement))
        {
            Some(problem) => problem.push(measurement),
            None => problems.push(vec![measurement]),
        }
    }
    problems
}

/// Per problem, the configurations ranked by median time (µs per launch) with its 95%
/// bootstrap interval, TFLOP/s and the ratio to the fastest; configurations that failed
/// validation follow, marked FAILED with the reason.
pub fn ranked_tables(measurements: &[Measurement]) -> String {
    let mut text = String::new();
    for problem in by_problem(measurements) {
        let first = problem[0];
        let _ = writeln!(
            text,
            "\n{} D={} {} B,H,S={} (keys{}, {})",
            first.kernel.spec.dtype.name(),
            first.shape.head_dim,
            causal_label(first.causal),
            shape_label(&first.shape),
            first.group().bucket.label(),
            first.grid.label()
        );
        let _ = writeln!(
            text,
            "{:>6}  {:<36} {:>10} {:>19} {:>8} {:>7}",
            "rank", "config", "median us", "95% CI us", "TFLOP/s", "x best"
        );
        let mut timed: Vec<(&Measurement, f64)> = problem
            .iter()
            .filter_map(|m| m.median_us().map(|us| (*m, us)))
            .collect();
        timed.sort_by(|a, b| a.1.total_cmp(&b.1));
        for (rank, (measurement, median_us)) in timed.iter().enumerate() {
            let interval = measurement
                .timing
                .as_ref()
                .map(|t| t.median_interval_us)
                .map_or(String::from("-"), |i| {
                    format!("{:.2} - {:.2}", i.low, i.high)
                });
            let _ = writeln!(
                text,
                "{:>6}  {:<36} {:>10.2} {:>19} {:>8.1} {:>7.3}",
                rank + 1,
                measurement.kernel.entry,
                median_us,
                interval,
                measurement.tflops().unwrap_or(f64::NAN),
                ratio_to_best(measurements, measurement).unwrap_or(f64::NAN),
            );
        }
        for measurement in problem {
            if let Validation::Failed(reason) = &measurement.validation {
                let _ = writeln!(
                    text,
                    "{:>6}  {:<36} {}",
                    "FAILED", measurement.kernel.entry, reason
                );
            }
        }
    }
    text
}

/// Per group, the configurations eligible for its dispatch entry (valid and timed at every
/// shape of the group) by mean time relative to the fastest, best first, and those that are not.
pub fn group_rankings(groups: &[Group]) -> String {
    let mut text = String::new();
    for group in groups {
        let shapes: Vec<String> = group.shapes.iter().map(shape_label).collect();
        let _ = writeln!(
            text,
            "\n{} over B,H,S = {}:",
            group.key.label(),
            shapes.join(" ")
        );
        let ranking = group.ranking();
        for (rank, ranked) in ranking.iter().enumerate() {
            let _ = writeln!(
                text,
                "{:>6}  {:<36} {:>7.3} x the fastest on average",
                rank + 1,
                ranked.kernel.entry,
                ranked.mean_relative_time
            );
        }
        for candidate in &group.candidates {
            if !ranking.iter().any(|r| r.kernel == candidate.kernel) {
                let _ = writeln!(
                    text,
                    "{:>6}  {:<36} not eligible: FAILED or untimed at some shape",
                    "-", candidate.kernel.entry
                );
            }
        }
    }
    text
}

/// One paragraph per confirmation: the medians of the interleaved re-timings, the rank test,
/// the effect size and the verdict.
pub fn confirmation_report(confirmations: &[Confirmation]) -> String {
    let mut text = String::new();
    for c in confirmations {
        let _ = writeln!(
            text,
            "\n{} at B,H,S={}, {} + {} interleaved repeats:\n  \
             winner     {:<36} {:>10.2} us (median)\n  \
             runner-up  {:<36} {:>10.2} us ({:+.2}%)\n  \
             Mann-Whitney U = {:.1}, p = {:.2e}; Cliff's delta = {:+.2}: {}",
            c.key.label(),
            shape_label(&c.shape),
            c.winner_us.len(),
            c.runner_up_us.len(),
            c.winner.entry,
            c.winner_median_us,
            c.runner_up.entry,
            c.runner_up_median_us,
            c.margin_percent(),
            c.test.u,
            c.test.p_value,
            c.cliffs_delta,
            c.verdict.describe()
        );
    }
    text
}

/// The dispatch table as a text table.
pub fn table_report(entries: &[DispatchEntry]) -> String {
    let mut text = format!(
        "{:<5} {:>4} {:<10} {:<7} {:<10} {:<36} {:>7} {:<9} {}\n",
        "dtype", "D", "masking", "keys", "grid", "entry", "margin", "confirmed", "measured on"
    );
    for entry in entries {
        let _ = writeln!(
            text,
            "{:<5} {:>4} {:<10} {:<7} {:<10} {:<36} {:>6.1}% {:<9} {}",
            entry.dtype.name(),
            entry.head_dim,
            causal_label(entry.causal),
            entry.bucket.label(),
            entry.grid.label(),
            entry.kernel.entry,
            entry.margin_percent,
            if entry.confirmed { "yes" } else { "no" },
            entry.measured_on
        );
    }
    text
}

/// A JSON number rounded to 4 decimals, or `None` (written as `null`) for none or a non-finite
/// value, which JSON cannot hold.
fn json_number(value: Option<f64>) -> Option<f64> {
    value
        .filter(|value| value.is_finite())
        .map(|value| rounded(value, 4))
}

fn json_samples(samples: &[f64]) -> Vec<f64> {
    samples
        .iter()
        .map(|&t| json_number(Some(t)).unwrap_or(f64::NAN))
        .collect()
}

/// One measurement of `tuning.json`, in the order of its fields there. `grid` is absent from
/// runs made before the dispatch table had a grid size.
#[derive(Serialize, Deserialize)]
pub(super) struct MeasurementJson {
    pub dtype: String,
    pub head_dim: usize,
    pub causal: bool,
    pub batch: usize,
    pub heads: usize,
    pub seq_len: usize,
    pub bucket: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<String>,
    pub config: String,
    pub valid: bool,
    pub failure: Option<String>,
    pub max_abs_error: Option<f64>,
    pub mean_abs_error: Option<f64>,
    pub plain_max_abs_error: Option<f64>,
    pub plain_mean_abs_error: Option<f64>,
    pub median_us: Option<f64>,
    pub ci_low_us: Option<f64>,
    pub ci_high_us: Option<f64>,
    pub tflops: Option<f64>,
    pub ratio_to_best: Option<f64>,
    pub launches_per_repeat: usize,
    pub samples_us: Vec<f64>,
}

impl MeasurementJson {
    fn new(measurements: &[Measurement], m: &Measurement) -> Self {
        let (errors, failure) = match &m.validation {
            Validation::Passed { ours, plain } => (
                [ours.max_abs, ours.mean_abs, plain.max_abs, plain.mean_abs].map(Some),
                None,
            ),
            Validation::Failed(reason) => ([None; 4], Some(reason.clone())),
        };
        let timing = m.timing.as_ref();
        Self {
            dtype: m.kernel.spec.dtype.name().to_owned(),
            head_dim: m.shape.head_dim,
            causal: m.causal,
            batch: m.shape.batch,
            heads: m.shape.heads_q,
            seq_len: m.shape.seq_len_q,
            bucket: m.group().bucket.label().to_owned(),
            grid: Some(m.grid.label().to_owned()),
            config: m.kernel.entry.to_owned(),
            valid: matches!(m.validation, Validation::Passed { .. }),
            failure,
            max_abs_error: json_number(errors[0]),
            mean_abs_error: json_number(errors[1]),
            plain_max_abs_error: json_number(errors[2]),
            plain_mean_abs_error: json_number(errors[3]),
            median_us: json_number(m.median_us()),
            ci_low_us: json_number(timing.map(|t| t.median_interval_us.low)),
            ci_high_us: json_number(timing.map(|t| t.median_interval_us.high)),
            tflops: json_number(m.tflops()),
            ratio_to_best: json_number(ratio_to_best(measurements, m)),
            launches_per_repeat: timing.map_or(0, |t| t.times.launches_per_repeat),
            samples_us: json_samples(timing.map_or(&[], |t| &t.times.per_launch_us)),
        }
    }
}

/// One confirmation of `tuning.json`.
#[derive(Serialize)]
struct ConfirmationJson {
    dtype: &'static str,
    head_dim: usize,
    causal: bool,
    bucket: &'static str,
    grid: &'static str,
    batch: usize,
    heads: usize,
    seq_len: usize,
    winner: &'static str,
    runner_up: &'static str,
    winner_median_us: Option<f64>,
    runner_up_median_us: Option<f64>,
    margin_percent: Option<f64>,
    mann_whitney_u: Option<f64>,
    /// Unrounded: p-values can be tiny.
    p_value: f64,
    cliffs_delta: Option<f64>,
    verdict: &'static str,
    winner_samples_us: Vec<f64>,
    runner_up_samples_us: Vec<f64>,
}

impl ConfirmationJson {
    fn new(c: &Confirmation) -> Self {
        Self {
            dtype: c.key.dtype.name(),
            head_dim: c.key.head_dim,
            causal: c.key.causal,
            bucket: c.key.bucket.label(),
            grid: c.key.grid.label(),
            batch: c.shape.batch,
            heads: c.shape.heads_q,
            seq_len: c.shape.seq_len_q,
            winner: c.winner.entry,
            runner_up: c.runner_up.entry,
            winner_median_us: json_number(Some(c.winner_median_us)),
            runner_up_median_us: json_number(Some(c.runner_up_median_us)),
            margin_percent: json_number(Some(c.margin_percent())),
            mann_whitney_u: json_number(Some(c.test.u)),
            p_value: c.test.p_value,
            cliffs_delta: json_number(Some(c.cliffs_delta)),
            verdict: c.verdict.describe(),
            winner_samples_us: json_samples(&c.winner_us),
            runner_up_samples_us: json_samples(&c.runner_up_us),
        }
    }
}

/// One dispatch-table entry of `tuning.json`.
#[derive(Serialize)]
struct EntryJson {
    dtype: &'static str,
    head_dim: usize,
    causal: bool,
    bucket: &'static str,
    grid: &'static str,
    entry: &'static str,
    margin_percent: Option<f64>,
    confirmed: bool,
    measured_on: &'static str,
}

impl EntryJson {
    fn new(e: &DispatchEntry) -> Self {
        Self {
            dtype: e.dtype.name(),
            head_dim: e.head_dim,
            causal: e.causal,
            bucket: e.bucket.label(),
            grid: e.grid.label(),
            entry: e.kernel.entry,
            margin_percent: json_number(Some(e.margin_percent)),
            confirmed: e.confirmed,
            measured_on: e.measured_on,
        }
    }
}

/// The run's header fields, first in `tuning.json`.
#[derive(Serialize)]
struct RunHeaderJson<'a> {
    tool: &'static str,
    device: &'a str,
    sm_count: usize,
    date: &'a str,
    seed: u64,
    quick: bool,
}

/// The `tool` of every `tuning.json`.
pub(super) const TOOL: &str = "flash-attn-tune";

fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("plain data serialises")
}

/// The whole run as one JSON object: `tool`, `device`, `sm_count`, `date`, `seed`, `quick`,
/// then `measurements` (one per configuration and problem, with its grid size, validation
/// errors, median, interval, TFLOP/s, ratio to the best and every repeat's time; numbers on 4
/// decimals), `confirmations` and the new `dispatch_table`. Every value is written by
/// serde_json; each list item goes on a line of its own, so that a run's files diff and grep
/// line by line.
pub fn to_json(run: &TuningRun<'_>) -> String {
    let header = json(&RunHeaderJson {
        tool: TOOL,
        device: run.device,
        sm_count: run.sm_count,
        date: run.date,
        seed: run.seed,
        quick: run.quick,
    });
    let list = |items: Vec<String>| items.join(",\n  ");
    format!(
        "{},\n\"measurements\":[\n  {}],\n\"confirmations\":[\n  {}],\n\"dispatch_table\":[\n  {}]}}\n",
        header.strip_suffix('}').expect("an object"),
        list(
            run.measurements
                .iter()
                .map(|m| json(&MeasurementJson::new(run.measurements, m)))
                .collect()
        ),
        list(
            run.confirmations
                .iter()
                .map(|c| json(&ConfirmationJson::new(c)))
                .collect()
        ),
        list(run.table.iter().map(|e| json(&EntryJson::new(e))).collect()),
    )
}

/// Distinct colours, one per configuration of a panel (cycled beyond ten).
const PALETTE: [RGBColor; 10] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
];

// Panel geometry, in pixels.
const WIDTH: u32 = 1060;
const PANEL_HEIGHT: u32 = 270;
const PLOT_WIDTH: u32 = 660;
const LEGEND_TOP: i32 = 46;
const LEGEND_LINE: u32 = 16;

/// A plot of each configuration's median time relative to the fastest configuration at each
/// shape: one panel per element type, head dim and masking, shapes along x, one dot per
/// configuration and shape (1 = the fastest), a legend naming the configurations. A
/// configuration that failed validation at a shape has no dot there, and the legend counts
/// its failures. Drawn with plotters' SVG backend.
pub fn to_svg(measurements: &[Measurement]) -> String {
    let mut panels: Vec<Vec<&Measurement>> = Vec::new();
    for m in measurements {
        let key = (m.kernel.spec.dtype, m.shape.head_dim, m.causal);
        match panels.iter_mut().find(|shown| {
            let first = shown[0];
            (first.kernel.spec.dtype, first.shape.head_dim, first.causal) == key
        }) {
            Some(shown) => shown.push(m),
            None => panels.push(vec![m]),
        }
    }
    // A panel grows with its legend (one line per configuration), so that the legend of the
    // screening's 88 configurations does not run into the next panel.
    let heights: Vec<u32> = panels
        .iter()
        .map(|shown| {
            let mut configs: Vec<&str> = shown.iter().map(|m| m.kernel.entry).collect();
            configs.sort_unstable();
            configs.dedup();
            PANEL_HEIGHT.max(LEGEND_TOP as u32 + LEGEND_LINE * configs.len() as u32 + 20)
        })
        .collect();
    let height = heights.iter().sum::<u32>().max(PANEL_HEIGHT);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).expect("drawing into a string");
        let mut rest = root;
        for (shown, &panel_height) in panels.iter().zip(&heights) {
            let (area, below) = rest.split_vertically(panel_height);
            panel(&area, measurements, shown).expect("drawing into a string");
            rest = below;
        }
    }
    svg.push('\n');
    svg
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Draws into `area` the panel of `shown`, the measurements of one element type, head dim and
/// masking.
fn panel(
    area: &Area<'_>,
    all: &[Measurement],
    shown: &[&Measurement],
) -> Result<(), DrawingAreaErrorKind<<SVGBackend<'static> as DrawingBackend>::ErrorType>> {
    let first = shown[0];
    let mut shapes: Vec<AttentionShape> = Vec::new();
    let mut configs: Vec<&'static str> = Vec::new();
    for m in shown {
        if !shapes.contains(&m.shape) {
            shapes.push(m.shape);
        }
        if !configs.contains(&m.kernel.entry) {
            configs.push(m.kernel.entry);
        }
    }
    let ratio = |config: &str, shape: &AttentionShape| {
        shown
            .iter()
            .find(|m| m.kernel.entry == config && m.shape == *shape)
            .and_then(|m| ratio_to_best(all, m))
    };
    let worst = shown
        .iter()
        .filter_map(|m| ratio_to_best(all, m))
        .fold(1.0, f64::max);
    // A grid step giving at most six lines above 1, and the top of the axis on a grid line.
    let step = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0]
        .into_iter()
        .find(|step| (worst - 1.0) / step <= 6.0)
        .unwrap_or(10.0);
    let lines = ((worst - 1.0) / step).ceil().max(1.0) as usize;
    let y_max = 1.0 + lines as f64 * step;

    let (plot_area, legend) = area.split_horizontally(PLOT_WIDTH);
    let title = format!(
        "{} D={} {}: median time per configuration, relative to the fastest at each shape",
        first.kernel.spec.dtype.name(),
        first.shape.head_dim,
        causal_label(first.causal)
    );
    area.draw(&Text::new(title, (70, 12), ("sans-serif", 13).into_font()))?;
    let mut chart = ChartBuilder::on(&plot_area.margin(32, 20, 10, 10))
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(-0.5..shapes.len() as f64 - 0.5, 1.0..y_max)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(shapes.len())
        .x_label_formatter(&|x| {
            let index = x.round();
            match shapes.get(index as usize) {
                Some(shape) if (x - index).abs() < 1e-9 && index >= 0.0 => shape_label(shape),
                _ => String::new(),
            }
        })
        .y_labels(lines + 1)
        .y_label_formatter(&|y| format!("{y:.2}"))
        .y_desc("time / fastest")
        .x_desc("shape B,H,S (query and key length S)")
        .draw()?;
    // Dots of one shape spread sideways so that equal ratios stay visible.
    let spread = (0.8 / configs.len() as f64).min(0.1);
    for (c, config) in configs.iter().enumerate() {
        let colour = PALETTE[c % PALETTE.len()];
        let offset = (c as f64 - (configs.len() - 1) as f64 / 2.0) * spread;
        let dots: Vec<(f64, f64)> = shapes
            .iter()
            .enumerate()
            .filter_map(|(s, shape)| Some((s as f64 + offset, ratio(config, shape)?)))
            .collect();
        let failed = shapes.len() - dots.len();
        chart.draw_series(
            dots.into_iter()
                .map(|point| Circle::new(point, 4, colour.filled())),
        )?;
        let legend_y = LEGEND_TOP + (LEGEND_LINE as usize * c) as i32;
        let note = if failed > 0 {
            format!(" - FAILED at {failed} of {} shapes", shapes.len())
        } else {
            String::new()
        };
        legend.draw(&Circle::new((10, legend_y), 4, colour.filled()))?;
        legend.draw(&Text::new(
            format!("{config}{note}"),
            (20, legend_y - 6),
            ("sans-serif", 11).into_font(),
        ))?;
    }
    Ok(())
}
