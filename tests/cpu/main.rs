//! Tests that need no GPU: the visibility rule (windows included), the score modifiers, the CPU
//! reference, problem validation, the PTX and its ptxas resource report, the embedded cubins,
//! the tile configurations, the autotuner's logic and dispatch table, the regression check,
//! variable-length batches, half 2's element types (feature `half2`), the README's cudarc
//! snippet and the links that the published packages hold. They run everywhere `cargo test`
//! runs, CI included.

mod alibi_serving;
mod config;
mod cubin;
mod dispatch;
#[cfg(feature = "half2")]
mod half_versions;
mod kv_cache;
mod mask;
mod modifiers;
mod packaging;
mod paged;
mod problem;
mod ptx;
mod ptxas;
mod readme;
mod reference;
mod regression;
mod safety;
mod serving_head_dims;
mod tuning;
mod varlen;
mod varlen_cache;

/// Multiprocessors of the H100 (SXM) the committed dispatch table was tuned on: the device these
/// tests dispatch for where they need one.
const H100_SM_COUNT: usize = 132;
