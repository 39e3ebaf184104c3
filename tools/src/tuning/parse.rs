//! Reading the measurements back from a `tuning.json` written by [`super::to_json`], so that the
//! reports can be redrawn without a GPU. A strict parser for exactly that format, not JSON in
//! general: one measurement object per line, its fields in the order written.

use super::{dtype_name, Interval, Measurement, Timing, Validation};
use flash_attn::reference::ErrorStats;
use flash_attn::{AttentionShape, GridSize};

use crate::timing::LaunchTimes;

/// The measurements of a [`super::to_json`] text, in the order written.
///
/// Each `config` is resolved with [`flash_attn::kernel_by_name`], each `grid` read back as written.
/// A `tuning.json` from before the dispatch table had a grid size has no `grid`: that run
/// grouped the shapes of a bucket together and its entries became the large-grid ones, so its
/// measurements read back as [`GridSize::Large`]. What the JSON does not hold is
/// rebuilt as the tuner makes it: shapes are multi-head with equal query and key lengths
/// (`AttentionShape::new`), `non_finite` is 0 and `host_us_per_launch` 0. Times and errors
/// come back rounded to the 4 decimals written; the derived fields (`median_us`, `tflops`,
/// `ratio_to_best`) are recomputed from the samples rather than read.
pub fn measurements_from_json(text: &str) -> Result<Vec<Measurement>, String> {
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, line)) if line.starts_with("{\"tool\":\"flash-attn-tune\",") => {}
        _ => return Err("line 1: not a tuning.json written by flash-attn-tune".to_owned()),
    }
    if !matches!(lines.next(), Some((_, "\"measurements\":["))) {
        return Err("line 2: expected \"measurements\":[".to_owned());
    }
    let mut measurements = Vec::new();
    for (index, line) in lines {
        let at = |message: String| format!("line {}: {message}", index + 1);
        let Some(line) = line.strip_prefix("  ") else {
            return Err(at(format!("expected an indented measurement: {line:?}")));
        };
        if line == "]," && measurements.is_empty() {
            return Ok(measurements);
        }
        let (object, last) = match (line.strip_suffix("],"), line.strip_suffix(',')) {
            (Some(object), _) => (object, true),
            (None, Some(object)) => (object, false),
            _ => return Err(at(format!("expected a line ending in , or ],: {line:?}"))),
        };
        measurements.push(measurement(object).map_err(at)?);
        if last {
            return Ok(measurements);
        }
    }
    Err("the measurements list is not closed".to_owned())
}

/// One measurement object.
fn measurement(object: &str) -> Result<Measurement, String> {
    let mut fields = Fields {
        rest: object,
        first: true,
    };
    let dtype = fields.string("dtype")?;
    let head_dim = fields.count("head_dim")?;
    let causal = fields.boolean("causal")?;
    let (batch, heads, seq_len) = (
        fields.count("batch")?,
        fields.count("heads")?,
        fields.count("seq_len")?,
    );
    let bucket = fields.string("bucket")?;
    let grid = if fields.next_is("grid") {
        let label = fields.string("grid")?;
        GridSize::ALL
            .into_iter()
            .find(|grid| grid.label() == label)
            .ok_or_else(|| format!("grid: unknown grid size {label:?}"))?
    } else {
        GridSize::Large
    };
    let config = fields.string("config")?;
    let valid = fields.boolean("valid")?;
    let failure = fields.string_or_null("failure")?;
    let mut errors = [None; 4];
    let error_names = [
        "max_abs_error",
        "mean_abs_error",
        "plain_max_abs_error",
        "plain_mean_abs_error",
    ];
    for (error, name) in errors.iter_mut().zip(error_names) {
        *error = fields.number(name)?;
    }
    // Derived from the samples: checked for form only.
    fields.number("median_us")?;
    let (ci_low, ci_high) = (fields.number("ci_low_us")?, fields.number("ci_high_us")?);
    fields.number("tflops")?;
    fields.number("ratio_to_best")?;
    let launches_per_repeat = fields.count("launches_per_repeat")?;
    let samples = fields.samples("samples_us")?;
    if fields.rest != "}" {
        return Err(format!("expected }} at the end, found {:?}", fields.rest));
    }

    let kernel = flash_attn::kernel_by_name(&config).map_err(|error| format!("config: {error}"))?;
    if dtype != dtype_name(kernel.dtype) || head_dim != kernel.tile.head_dim {
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

/// A cursor over one object's fields, read in the order written.
struct Fields<'a> {
    rest: &'a str,
    first: bool,
}

impl<'a> Fields<'a> {
    fn eat(&mut self, token: &str) -> Result<(), String> {
        match self.rest.strip_prefix(token) {
            Some(rest) => {
                self.rest = rest;
                Ok(())
            }
            None => Err(format!("expected {token} at {:.40?}", self.rest)),
        }
    }

    /// Consumes `{"name":` for the first field, `,"name":` for the others.
    fn key(&mut self, name: &str) -> Result<(), String> {
        self.eat(if self.first { "{" } else { "," })?;
        self.first = false;
        self.eat(&format!("\"{name}\":"))
    }

    /// Whether the next field, not the first, is `name`.
    fn next_is(&self, name: &str) -> bool {
        self.rest.starts_with(&format!(",\"{name}\":"))
    }

    /// A bare value (number, `true`, `false`, `null`), up to the next `,`, `]` or `}`.
    fn bare(&mut self) -> &'a str {
        let end = self.rest.find([',', ']', '}']).unwrap_or(self.rest.len());
        let (token, rest) = self.rest.split_at(end);
        self.rest = rest;
        token
    }

    fn count(&mut self, name: &str) -> Result<usize, String> {
        self.key(name)?;
        let token = self.bare();
        let digits = !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit());
        digits
            .then(|| token.parse().ok())
            .flatten()
            .ok_or_else(|| format!("{name}: expected a count, found {token:?}"))
    }

    fn boolean(&mut self, name: &str) -> Result<bool, String> {
        self.key(name)?;
        match self.bare() {
            "true" => Ok(true),
            "false" => Ok(false),
            token => Err(format!("{name}: expected true or false, found {token:?}")),
        }
    }

    /// A number as written (`-`, digits and a point), or `null`: `None`.
    fn number_token(name: &str, token: &str) -> Result<Option<f64>, String> {
        if token == "null" {
            return Ok(None);
        }
        let digits = token.strip_prefix('-').unwrap_or(token);
        let well_formed = digits.split_once('.').map_or(
            !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()),
            |(whole, fraction)| {
                [whole, fraction]
                    .iter()
                    .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
            },
        );
        well_formed
            .then(|| token.parse().ok())
            .flatten()
            .map(Some)
            .ok_or_else(|| format!("{name}: expected a number or null, found {token:?}"))
    }

    fn number(&mut self, name: &str) -> Result<Option<f64>, String> {
        self.key(name)?;
        Self::number_token(name, self.bare())
    }

    /// `[n,n,...]`, every element a number.
    fn samples(&mut self, name: &str) -> Result<Vec<f64>, String> {
        self.key(name)?;
        self.eat("[")?;
        let mut values = Vec::new();
        if self.eat("]").is_ok() {
            return Ok(values);
        }
        loop {
            let value = Self::number_token(name, self.bare())?;
            values.push(value.ok_or_else(|| format!("{name}: null in the samples"))?);
            if self.eat("]").is_ok() {
                return Ok(values);
            }
            self.eat(",")?;
        }
    }

    fn string(&mut self, name: &str) -> Result<String, String> {
        self.string_or_null(name)?
            .ok_or_else(|| format!("{name}: expected a string, found null"))
    }

    /// A string with the escapes of [`super::json_string`], or `null`: `None`.
    fn string_or_null(&mut self, name: &str) -> Result<Option<String>, String> {
        self.key(name)?;
        if self.eat("null").is_ok() {
            return Ok(None);
        }
        self.eat("\"")
            .map_err(|_| format!("{name}: expected a string or null"))?;
        let mut value = String::new();
        let mut chars = self.rest.char_indices();
        while let Some((index, c)) = chars.next() {
            match c {
                '"' => {
                    self.rest = &self.rest[index + 1..];
                    return Ok(Some(value));
                }
                '\\' => value.push(match chars.next().map(|(_, c)| c) {
                    Some('"') => '"',
                    Some('\\') => '\\',
                    Some('n') => '\n',
                    Some('r') => '\r',
                    Some('t') => '\t',
                    Some('u') => {
                        let hex: String = chars.by_ref().take(4).map(|(_, c)| c).collect();
                        u32::from_str_radix(&hex, 16)
                            .ok()
                            .filter(|_| hex.len() == 4)
                            .and_then(char::from_u32)
                            .ok_or_else(|| format!("{name}: bad escape \\u{hex}"))?
                    }
                    _ => return Err(format!("{name}: bad escape")),
                }),
                c if (c as u32) < 0x20 => return Err(format!("{name}: raw control character")),
                c => value.push(c),
            }
        }
        Err(format!("{name}: unterminated string"))
    }
}
