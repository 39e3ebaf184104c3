//! Reading the measurements back from a `tuning.json` written by [`super::to_json`], so that the
//! reports can be redrawn without a GPU.

use serde::Deserialize;

use super::report::{MeasurementJson, TOOL};
use super::{Measurement, Timing, Validation};
use crate::stats::Interval;
use flash_attn::reference::ErrorStats;
use flash_attn::{AttentionShape, GridSize};

use crate::timing::LaunchTimes;

/// The measurements of a [`super::to_json`] text, in the order written.
///
/// Each `config` is resolved with [`flash_attn::kernel_by_name`] (so a run over the whole space
/// reads back only in a `FLASH_ATTN_KERNELS=all` build), each `grid` read back as written.
/// A `tuning.json` from before the dispatch table had a grid size has no `grid`: that run
/// grouped the shapes of a bucket together and its entries became the large-grid ones, so its
/// measurements read back as [`GridSize::Large`]. What the JSON does not hold is
/// rebuilt as the tuner makes it: shapes are multi-head with equal query and key lengths
/// (`AttentionShape::new`), `non_finite` is 0 and `host_us_per_launch` 0. Times and errors
/// come back rounded to the 4 decimals written; the derived fields (`median_us`, `tflops`,
/// `ratio_to_best`) are recomputed from the samples rather than read.
pub fn measurements_from_json(text: &str) -> Result<Vec<Measurement>, String> {
    /// What a `tuning.json` is recognised by, read first so that another JSON file is named as
    /// such rather than by its first missing field.
    #[derive(Deserialize)]
    struct Tool {
        tool: Option<String>,
    }
    #[derive(Deserialize)]
    struct Run {
        measurements: Vec<MeasurementJson>,
    }
    let tool: Tool = serde_json::from_str(text).map_err(|error| error.to_string())?;
    if tool.tool.as_deref() != Some(TOOL) {
        return Err(format!("not a tuning.json written by {TOOL}"));
    }
    let run: Run = serde_json::from_str(text).map_err(|error| error.to_string())?;
    run.measurements
        .into_iter()
        .enumerate()
        .map(|(index, json)| {
            measurement(json).map_err(|error| format!("measurement {index}: {error}"))
        })
        .collect()
}

/// One measurement object.
fn measurement(json: MeasurementJson) -> Result<Measurement, String> {
    let grid = match &json.grid {
        Some(label) => GridSize::ALL
            .into_iter()
            .find(|grid| grid.label() == label)
            .ok_or_else(|| format!("grid: unknown grid size {label:?}"))?,
        None => GridSize::Large,
    };
    let MeasurementJson {
        dtype,
        head_dim,
        causal,
        batch,
        heads,
        seq_len,
        bucket,
        config,
        valid,
        failure,
        max_abs_error,
        mean_abs_error,
        plain_max_abs_error,
        plain_mean_abs_error,
        ci_low_us: ci_low,
        ci_high_us: ci_high,
        launches_per_repeat,
        samples_us: samples,
        ..
    } = json;
    let errors = [
        max_abs_error,
        mean_abs_error,
        plain_max_abs_error,
        plain_mean_abs_error,
    ];
    let kernel = flash_attn::kernel_by_name(&config).map_err(|error| {
        let hint = match flash_attn::KERNEL_SET {
            flash_attn::KernelSet::All => "",
            flash_attn::KernelSet::Shipping => {
                " (this build holds only the shipping set: build with FLASH_ATTN_KERNELS=all \
                 to read a run over the whole space)"
            }
        };
        format!("config: {error}{hint}")
    })?;
    if dtype != kernel.spec.dtype.name() || head_dim != kernel.spec.tile.head_dim {
        return Err(format!("{config} is not a {dtype} D={head_dim} kernel"));
    }
    let validation = match (valid, failure) {
        (true, None) => {
            let [max, mean, plain_max, plain_mean] = errors;
            // `to_json` writes a non-finite error as null.
            let stats = |max_abs: Option<f64>, mean_abs: Option<f64>| ErrorStats {
                max_abs: max_abs.unwrap_or(f64::NAN),
                mean_abs: mean_abs.unwrap_or(f64::NAN),
                non_finite: 0,
            };
            Validation::Passed {
                ours: stats(max, mean),
                plain: stats(plain_max, plain_mean),
            }
        }
        (false, Some(reason)) => Validation::Failed(reason),
        _ => return Err("\"valid\" and \"failure\" disagree".to_owned()),
    };
    let timing = match (samples.is_empty(), ci_low, ci_high) {
        (true, None, None) => None,
        (false, Some(low), Some(high)) => Some(Timing {
            times: LaunchTimes {
                per_launch_us: samples,
                launches_per_repeat,
                host_us_per_launch: 0.0,
            },
            median_interval_us: Interval { low, high },
        }),
        _ => return Err("samples and their interval disagree".to_owned()),
    };
    let measurement = Measurement {
        kernel,
        shape: AttentionShape::new(batch, heads, seq_len, head_dim),
        causal,
        grid,
        validation,
        timing,
    };
    if bucket != measurement.group().bucket.label() {
        return Err(format!("bucket {bucket:?} does not hold S={seq_len}"));
    }
    Ok(measurement)
}
