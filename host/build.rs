//! Builds the kernels and writes the tables the crate includes: see
//! [`flash_attn_build::build_kernels`].

fn main() {
    flash_attn_build::build_kernels();
}
