//! Tests that need no GPU: the CPU reference, the PTX and its ptxas resource report, and the
//! tile configurations. They run everywhere `cargo test` runs, CI included.

mod config;
mod ptx;
mod ptxas;
mod reference;
