//! Tests that need no GPU: the CPU reference, problem validation, the PTX and its ptxas
//! resource report, and the tile configurations. They run everywhere `cargo test` runs, CI
//! included.

mod config;
mod problem;
mod ptx;
mod ptxas;
mod reference;
