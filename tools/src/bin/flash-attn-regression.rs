//! Compares a new timing run of our kernels with a baseline, case by case, and exits 1 when a
//! case is slower beyond the noise and the tolerance (the rule: `flash_attn_tools::regression`).
//!
//! `flash-attn-regression --baseline results/baseline.json --current ours.json [--alpha A]
//! [--tolerance T]`; both files as `flash-attn-timing --json` writes them. Exit status: 0 when
//! no case is slower, 1 when one is, 2 when the files or arguments are unusable.

use std::process::ExitCode;

use flash_attn_tools::regression::{compare, DEFAULT_ALPHA, DEFAULT_TOLERANCE};
use flash_attn_tools::timing::TimingFile;

const USAGE: &str = "usage: flash-attn-regression --baseline A.json --current B.json \
                     [--alpha 0.01] [--tolerance 0.02]";

fn read(path: &str) -> Result<TimingFile, String> {
    let text =
        std::fs::read_to_string(path).map_err(|error| format!("cannot read {path}: {error}"))?;
    serde_json::from_str(&text).map_err(|error| format!("{path}: {error}"))
}

fn run() -> Result<usize, String> {
    let (mut baseline, mut current) = (None, None);
    let (mut alpha, mut tolerance) = (DEFAULT_ALPHA, DEFAULT_TOLERANCE);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value\n{USAGE}"));
        let number = |text: String| {
            text.parse::<f64>()
                .map_err(|_| format!("not a number: {text:?}\n{USAGE}"))
        };
        match arg.as_str() {
            "--baseline" => baseline = Some(value()?),
            "--current" => current = Some(value()?),
            "--alpha" => alpha = number(value()?)?,
            "--tolerance" => tolerance = number(value()?)?,
            _ => return Err(format!("unknown argument {arg:?}\n{USAGE}")),
        }
    }
    let (Some(baseline), Some(current)) = (baseline, current) else {
        return Err(USAGE.to_owned());
    };
    let (report, slower) = compare(&read(&baseline)?, &read(&current)?, alpha, tolerance)?;
    print!("{report}");
    Ok(slower)
}

fn main() -> ExitCode {
    match run() {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("flash-attn-regression: {message}");
            ExitCode::from(2)
        }
    }
}
