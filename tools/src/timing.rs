//! Timing of back-to-back launches with CUDA events, as the benchmarks and the peer comparison
//! report it.

use cust::event::{Event, EventFlags};
use cust::stream::Stream;
use flash_attn::Error;

/// The shapes `(batch, heads, seq_len, head_dim)` of the peer table in the project's anchors,
/// timed by the benchmarks and the timing tool; the seed shape first.
pub const ANCHOR_SHAPES: [(usize, usize, usize, usize); 6] = [
    (4, 8, 512, 64),
    (16, 16, 512, 64),
    (32, 16, 512, 64),
    (4, 8, 512, 128),
    (8, 16, 2048, 64),
    (2, 16, 4096, 128),
];

/// Per-launch times of several repeats, each the mean over `launches_per_repeat` back-to-back
/// launches between two events.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchTimes {
    /// Microseconds per launch, one value per repeat, sorted ascending.
    pub per_launch_us: Vec<f64>,
    pub launches_per_repeat: usize,
    /// Host time per launch call (median over repeats): if it reaches the GPU time, the
    /// measurement is bound by the launch path, not the kernel.
    pub host_us_per_launch: f64,
}

impl LaunchTimes {
    /// The `q`-quantile (0..=1) with linear interpolation.
    pub fn quantile(&self, q: f64) -> f64 {
        let sorted = &self.per_launch_us;
        let position = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
        let (low, high) = (position.floor() as usize, position.ceil() as usize);
        sorted[low] + (sorted[high] - sorted[low]) * (position - low as f64)
    }

    pub fn median(&self) -> f64 {
        self.quantile(0.5)
    }
}

/// Runs `launch` `warmup` times, then `repeats` times `launches_per_repeat` launches between
/// two events on `stream`, and returns the time per launch of each repeat.
pub fn time_launches(
    stream: &Stream,
    warmup: usize,
    repeats: usize,
    launches_per_repeat: usize,
    mut launch: impl FnMut() -> Result<(), Error>,
) -> Result<LaunchTimes, Error> {
    assert!(repeats > 0 && launches_per_repeat > 0, "nothing to time");
    for _ in 0..warmup {
        launch()?;
    }
    stream.synchronize()?;
    let (start, stop) = (
        Event::new(EventFlags::DEFAULT)?,
        Event::new(EventFlags::DEFAULT)?,
    );
    let mut per_launch_us = Vec::with_capacity(repeats);
    let mut host_us = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        start.record(stream)?;
        let host_start = std::time::Instant::now();
        for _ in 0..launches_per_repeat {
            launch()?;
        }
        host_us.push(host_start.elapsed().as_secs_f64() * 1e6 / launches_per_repeat as f64);
        stop.record(stream)?;
        stop.synchronize()?;
        let milliseconds = stop.elapsed_time_f32(&start)? as f64;
        per_launch_us.push(milliseconds * 1e3 / launches_per_repeat as f64);
    }
    per_launch_us.sort_by(f64::total_cmp);
    host_us.sort_by(f64::total_cmp);
    Ok(LaunchTimes {
        per_launch_us,
        launches_per_repeat,
        host_us_per_launch: host_us[host_us.len() / 2],
    })
}
