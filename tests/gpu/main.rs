//! Tests that run the kernels. Without a GPU each one prints a one-line skip message and
//! passes, unless `FLASH_ATTN_REQUIRE_GPU` is set (the GPU bundle sets it).

mod edge_cases;
mod errors;
mod forward;
mod safety;
mod support;
mod sweep;
