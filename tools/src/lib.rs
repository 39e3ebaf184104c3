//! The tools around the flash-attn runtime, none of which a user links: the autotuner's logic
//! ([`tuning`]), the statistics of the tuner and the regression check ([`stats`],
//! [`regression`]), event timing and its JSON file ([`timing`]) and the ptxas gate of this
//! build ([`gate`]), and the `flash-attn-configs`, `flash-attn-timing`, `flash-attn-load-time`,
//! `flash-attn-tune` and `flash-attn-regression` binaries built on them.

pub mod gate;
pub mod regression;
pub mod stats;
pub mod timing;
pub mod tuning;
