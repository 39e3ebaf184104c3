//! The tools around the flash-attn runtime, none of which a user links: the autotuner's logic
//! ([`tuning`]), event timing ([`timing`]) and the ptxas gate of this build ([`gate`]), and the
//! `flash-attn-configs`, `flash-attn-timing`, `flash-attn-load-time` and `flash-attn-tune`
//! binaries built on them.

pub mod gate;
pub mod timing;
pub mod tuning;
