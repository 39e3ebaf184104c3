//! What a tuner run reports: the ranked tables, the confirmation stage and the dispatch table as
//! text, everything as JSON, and a plot of each configuration's time relative to the best as
//! SVG. All hand-written, so that the crate needs no serialisation or plotting dependency.

use std::fmt::Write;

use flash_attn::{AttentionShape, DispatchEntry};

use super::{dtype_name, ratio_to_best, Confirmation, Group, Measurement, Validation};

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
            dtype_name(first.kernel.dtype),
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
            dtype_name(entry.dtype),
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

/// `value` as a JSON string literal: quotes, backslashes and control characters escaped.
pub fn json_string(value: &str) -> String {
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('"');
    for c in value.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(quoted, "\\u{:04x}", c as u32);
            }
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// A JSON number, or `null` for none or a non-finite value (which JSON cannot hold).
fn json_number(value: Option<f64>) -> String {
    match value {
        Some(value) if value.is_finite() => format!("{value:.4}"),
        _ => String::from("null"),
    }
}

fn json_samples(samples: &[f64]) -> String {
    let values: Vec<String> = samples.iter().map(|&t| json_number(Some(t))).collect();
    format!("[{}]", values.join(","))
}

fn measurement_json(measurements: &[Measurement], m: &Measurement) -> String {
    let (errors, failure) = match &m.validation {
        Validation::Passed { ours, plain } => (
            [ours.max_abs, ours.mean_abs, plain.max_abs, plain.mean_abs].map(Some),
            String::from("null"),
        ),
        Validation::Failed(reason) => ([None; 4], json_string(reason)),
    };
    let timing = m.timing.as_ref();
    format!(
        concat!(
            "{{\"dtype\":\"{}\",\"head_dim\":{},\"causal\":{},\"batch\":{},\"heads\":{},",
            "\"seq_len\":{},\"bucket\":\"{}\",\"grid\":\"{}\",\"config\":\"{}\",\"valid\":{},",
            "\"failure\":{},\"max_abs_error\":{},\"mean_abs_error\":{},\"plain_max_abs_error\":{},",
            "\"plain_mean_abs_error\":{},\"median_us\":{},\"ci_low_us\":{},\"ci_high_us\":{},",
            "\"tflops\":{},\"ratio_to_best\":{},\"launches_per_repeat\":{},\"samples_us\":{}}}"
        ),
        dtype_name(m.kernel.dtype),
        m.shape.head_dim,
        m.causal,
        m.shape.batch,
        m.shape.heads_q,
        m.shape.seq_len_q,
        m.group().bucket.label(),
        m.grid.label(),
        m.kernel.entry,
        matches!(m.validation, Validation::Passed { .. }),
        failure,
        json_number(errors[0]),
        json_number(errors[1]),
        json_number(errors[2]),
        json_number(errors[3]),
        json_number(m.median_us()),
        json_number(timing.map(|t| t.median_interval_us.low)),
        json_number(timing.map(|t| t.median_interval_us.high)),
        json_number(m.tflops()),
        json_number(ratio_to_best(measurements, m)),
        timing.map_or(0, |t| t.times.launches_per_repeat),
        json_samples(timing.map_or(&[], |t| &t.times.per_launch_us)),
    )
}

fn confirmation_json(c: &Confirmation) -> String {
    format!(
        concat!(
            "{{\"dtype\":\"{}\",\"head_dim\":{},\"causal\":{},\"bucket\":\"{}\",\"grid\":\"{}\",",
            "\"batch\":{},\"heads\":{},\"seq_len\":{},\"winner\":\"{}\",\"runner_up\":\"{}\",",
            "\"winner_median_us\":{},\"runner_up_median_us\":{},\"margin_percent\":{},",
            "\"mann_whitney_u\":{},\"p_value\":{},\"cliffs_delta\":{},\"verdict\":\"{}\",",
            "\"winner_samples_us\":{},\"runner_up_samples_us\":{}}}"
        ),
        dtype_name(c.key.dtype),
        c.key.head_dim,
        c.key.causal,
        c.key.bucket.label(),
        c.key.grid.label(),
        c.shape.batch,
        c.shape.heads_q,
        c.shape.seq_len_q,
        c.winner.entry,
        c.runner_up.entry,
        json_number(Some(c.winner_median_us)),
        json_number(Some(c.runner_up_median_us)),
        json_number(Some(c.margin_percent())),
        json_number(Some(c.test.u)),
        // p-values can be tiny: scientific notation keeps their digits.
        format!("{:e}", c.test.p_value),
        json_number(Some(c.cliffs_delta)),
        c.verdict.describe(),
        json_samples(&c.winner_us),
        json_samples(&c.runner_up_us),
    )
}

fn entry_json(e: &DispatchEntry) -> String {
    format!(
        concat!(
            "{{\"dtype\":\"{}\",\"head_dim\":{},\"causal\":{},\"bucket\":\"{}\",\"grid\":\"{}\",",
            "\"entry\":\"{}\",\"margin_percent\":{},\"confirmed\":{},\"measured_on\":{}}}"
        ),
        dtype_name(e.dtype),
        e.head_dim,
        e.causal,
        e.bucket.label(),
        e.grid.label(),
        e.kernel.entry,
        json_number(Some(e.margin_percent)),
        e.confirmed,
        json_string(e.measured_on)
    )
}

/// The whole run as one JSON object: `device`, `sm_count`, `date`, `seed`, `quick`, then
/// `measurements` (one per configuration and problem, with its grid size, validation errors,
/// median, interval, TFLOP/s, ratio to the best and every repeat's time), `confirmations` and
/// the new `dispatch_table`.
pub fn to_json(run: &TuningRun<'_>) -> String {
    let join = |items: Vec<String>| items.join(",\n  ");
    format!(
        "{{\"tool\":\"flash-attn-tune\",\"device\":{},\"sm_count\":{},\"date\":{},\"seed\":{},\
         \"quick\":{},\n\
         \"measurements\":[\n  {}],\n\"confirmations\":[\n  {}],\n\"dispatch_table\":[\n  {}]}}\n",
        json_string(run.device),
        run.sm_count,
        json_string(run.date),
        run.seed,
        run.quick,
        join(
            run.measurements
                .iter()
                .map(|m| measurement_json(run.measurements, m))
                .collect()
        ),
        join(run.confirmations.iter().map(confirmation_json).collect()),
        join(run.table.iter().map(entry_json).collect()),
    )
}

/// Escapes text for an XML text node or attribute.
fn xml_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Distinct colours, one per configuration of a panel (cycled beyond ten).
const PALETTE: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

// Panel geometry, in SVG user units.
const WIDTH: f64 = 1060.0;
const PANEL_HEIGHT: f64 = 270.0;
const PLOT_LEFT: f64 = 70.0;
const PLOT_WIDTH: f64 = 560.0;
const PLOT_TOP: f64 = 40.0;
const PLOT_HEIGHT: f64 = 170.0;
const LEGEND_LEFT: f64 = PLOT_LEFT + PLOT_WIDTH + 30.0;
const LEGEND_LINE: f64 = 16.0;

/// A plot of each configuration's median time relative to the fastest configuration at each
/// shape: one panel per element type, head dim and masking, shapes along x, one dot per
/// configuration and shape (1 = the fastest), a legend naming the configurations. A
/// configuration that failed validation at a shape has no dot there, and the legend counts
/// its failures.
pub fn to_svg(measurements: &[Measurement]) -> String {
    let mut families: Vec<Vec<&Measurement>> = Vec::new();
    for m in measurements {
        let family = (m.kernel.dtype, m.shape.head_dim, m.causal);
        match families.iter_mut().find(|f| {
            let first = f[0];
            (first.kernel.dtype, first.shape.head_dim, first.causal) == family
        }) {
            Some(f) => f.push(m),
            None => families.push(vec![m]),
        }
    }
    // A panel grows with its legend (one line per configuration), so that the legend of the
    // screening's 88 configurations does not run into the next panel.
    let heights: Vec<f64> = families
        .iter()
        .map(|family| {
            let mut configs: Vec<&str> = family.iter().map(|m| m.kernel.entry).collect();
            configs.sort_unstable();
            configs.dedup();
            PANEL_HEIGHT.max(PLOT_TOP + LEGEND_LINE * configs.len() as f64 + 20.0)
        })
        .collect();
    let height = heights.iter().sum::<f64>().max(PANEL_HEIGHT);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    let mut top = 0.0;
    for (family, panel_height) in families.iter().zip(&heights) {
        panel(&mut svg, measurements, family, top);
        top += panel_height;
    }
    svg.push_str("</svg>\n");
    svg
}

/// Draws one family's panel with its top edge at `top`.
fn panel(svg: &mut String, all: &[Measurement], family: &[&Measurement], top: f64) {
    let first = family[0];
    let mut shapes: Vec<AttentionShape> = Vec::new();
    let mut configs: Vec<&'static str> = Vec::new();
    for m in family {
        if !shapes.contains(&m.shape) {
            shapes.push(m.shape);
        }
        if !configs.contains(&m.kernel.entry) {
            configs.push(m.kernel.entry);
        }
    }
    let ratio = |config: &str, shape: &AttentionShape| {
        family
            .iter()
            .find(|m| m.kernel.entry == config && m.shape == *shape)
            .and_then(|m| ratio_to_best(all, m))
    };
    let worst = family
        .iter()
        .filter_map(|m| ratio_to_best(all, m))
        .fold(1.0, f64::max);
    // A grid step giving at most six lines above 1, and the top of the axis on a grid line.
    let step = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0]
        .into_iter()
        .find(|step| (worst - 1.0) / step <= 6.0)
        .unwrap_or(10.0);
    let y_max = 1.0 + ((worst - 1.0) / step).ceil().max(1.0) * step;
    let (plot_top, plot_bottom) = (top + PLOT_TOP, top + PLOT_TOP + PLOT_HEIGHT);
    let y_of = |ratio: f64| plot_bottom - (ratio - 1.0) / (y_max - 1.0) * PLOT_HEIGHT;
    let column = PLOT_WIDTH / shapes.len() as f64;

    let _ = writeln!(
        svg,
        "<text x=\"{PLOT_LEFT}\" y=\"{:.1}\" font-size=\"13\" font-weight=\"bold\">{} D={} {}: \
         median time per configuration, relative to the fastest at each shape</text>",
        top + 22.0,
        dtype_name(first.kernel.dtype),
        first.shape.head_dim,
        causal_label(first.causal)
    );
    let lines = ((y_max - 1.0) / step).round() as usize;
    for line in 0..=lines {
        let value = 1.0 + line as f64 * step;
        let y = y_of(value);
        let _ = writeln!(
            svg,
            "<line x1=\"{PLOT_LEFT}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{value:.2}</text>",
            PLOT_LEFT + PLOT_WIDTH,
            PLOT_LEFT - 6.0,
            y + 4.0
        );
    }
    let _ = writeln!(
        svg,
        "<rect x=\"{PLOT_LEFT}\" y=\"{plot_top:.1}\" width=\"{PLOT_WIDTH}\" height=\"{PLOT_HEIGHT}\" \
         fill=\"none\" stroke=\"#333\"/>\n\
         <text transform=\"translate({:.1},{:.1}) rotate(-90)\" text-anchor=\"middle\">\
         time / fastest</text>\n\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">shape B,H,S (query and key \
         length S)</text>",
        PLOT_LEFT - 45.0,
        plot_top + PLOT_HEIGHT / 2.0,
        PLOT_LEFT + PLOT_WIDTH / 2.0,
        plot_bottom + 38.0
    );
    for (index, shape) in shapes.iter().enumerate() {
        let left = PLOT_LEFT + index as f64 * column;
        if index > 0 {
            let _ = writeln!(
                svg,
                "<line x1=\"{left:.1}\" x2=\"{left:.1}\" y1=\"{plot_top:.1}\" \
                 y2=\"{plot_bottom:.1}\" stroke=\"#eee\"/>"
            );
        }
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            left + column / 2.0,
            plot_bottom + 18.0,
            shape_label(shape)
        );
    }
    // Dots of one shape spread sideways so that equal ratios stay visible.
    let spread = (column * 0.8 / configs.len() as f64).min(10.0);
    for (c, config) in configs.iter().enumerate() {
        let colour = PALETTE[c % PALETTE.len()];
        let offset = (c as f64 - (configs.len() - 1) as f64 / 2.0) * spread;
        let mut failed = 0;
        for (s, shape) in shapes.iter().enumerate() {
            let Some(value) = ratio(config, shape) else {
                failed += 1;
                continue;
            };
            let _ = writeln!(
                svg,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{colour}\">\
                 <title>{config} at {}: {value:.3}x the fastest</title></circle>",
                PLOT_LEFT + (s as f64 + 0.5) * column + offset,
                y_of(value),
                shape_label(shape)
            );
        }
        let legend_y = plot_top + 6.0 + LEGEND_LINE * c as f64;
        let note = if failed > 0 {
            format!(" - FAILED at {failed} of {} shapes", shapes.len())
        } else {
            String::new()
        };
        let _ = writeln!(
            svg,
            "<circle cx=\"{LEGEND_LEFT}\" cy=\"{legend_y:.1}\" r=\"4\" fill=\"{colour}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            LEGEND_LEFT + 10.0,
            legend_y + 4.0,
            xml_text(&format!("{config}{note}"))
        );
    }
}
