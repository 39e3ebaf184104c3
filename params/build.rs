//! Generates the list of PTX entries the build compiles, from the candidate space of
//! `src/spec.rs`, the compile-time gates in `src/tile.rs` and, by default, the data files that
//! name the shipping set (the dispatch table and the fallbacks, read by
//! `build-support/src/dispatch.rs`). This script includes those files, so the list cannot drift
//! from the space, the gates or the data:
//!
//! - `for_each_kernel_entry_of_shard!`, which the GPU crate's shards expand into entry points;
//! - `KERNEL_SET` and `BUILT_CONFIGS`, the same list for the host.
//!
//! `FLASH_ATTN_KERNELS=all` compiles the search space, every spec that passes the compile-time
//! gates; unset (or `shipping`), only the shipping set: the dense kernels the data files name,
//! and every kernel of the other variants (serving, paged, modified).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[path = "src/arch.rs"]
#[allow(dead_code)]
mod arch;
// A link to `build-support/src/dispatch.rs` (a file in the package), as `shared/`'s data files
// are links to `host/`'s: the package builds on its own.
#[path = "shared/dispatch.rs"]
#[allow(dead_code)]
mod dispatch;
#[path = "src/spec.rs"]
#[allow(dead_code)]
mod spec;
#[path = "src/tile.rs"]
#[allow(dead_code)]
mod tile;

use spec::{
    for_each_gated_config, KernelSet, KernelSpec, SpecArgs, CANDIDATE_FAMILIES, KERNELS_ENV,
};

/// The kernel set `FLASH_ATTN_KERNELS` asks for.
fn kernel_set() -> KernelSet {
    println!("cargo:rerun-if-env-changed={KERNELS_ENV}");
    match std::env::var(KERNELS_ENV).as_deref() {
        Err(std::env::VarError::NotPresent) | Ok("") | Ok("shipping") => KernelSet::Shipping,
        Ok("all") => KernelSet::All,
        other => panic!(
            "{KERNELS_ENV}={other:?}: expected `shipping` (the default: the kernels the dispatch \
             table and the fallbacks name) or `all` (every configuration that passes the \
             compile-time gates)"
        ),
    }
}

/// The specs to compile, in entry order.
fn built_configs(set: KernelSet) -> Vec<KernelSpec> {
    let mut gated = Vec::new();
    for_each_gated_config(|spec| gated.push(spec));
    if set == KernelSet::All {
        return gated;
    }
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    // Links to the data files of `host/`, which the package holds as files.
    let shipping = dispatch::read_default_api_data(&manifest_dir.join("shared")).shipping_set();
    let unknown: Vec<&String> = shipping
        .iter()
        .filter(|entry| !gated.iter().any(|spec| spec.to_string() == **entry))
        .collect();
    if !unknown.is_empty() {
        panic!(
            "the dispatch tables or the fallbacks ({}/) name kernels that are not specs passing \
             the compile-time gates: {unknown:?}",
            dispatch::DATA_DIR
        );
    }
    // The other variants' spaces are small (`SERVING_TILES`, `MODIFIED_TILES`) and the host
    // picks among them at run time: they ship whole.
    gated.retain(|spec| spec.variant.ships_whole() || shipping.contains(&spec.to_string()));
    gated
}

fn main() {
    println!("cargo:rerun-if-changed=src/spec.rs");
    println!("cargo:rerun-if-changed=src/tile.rs");
    println!("cargo:rerun-if-changed=src/arch.rs");
    println!("cargo:rerun-if-changed=shared/dispatch.rs");
    // `links = "flash_attn_params"`: the runtime's build script reads these sources' folder as
    // `DEP_FLASH_ATTN_PARAMS_SOURCE_DIR`, and a packaged runtime builds its kernels against them.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    println!("cargo:source_dir={manifest_dir}");
    let set = kernel_set();
    let configs = built_configs(set);
    // Each family's entries go to its own shards (built for its own PTX targets only),
    // round-robin in entry order.
    let mut shards: Vec<(spec::Family, usize, String)> = CANDIDATE_FAMILIES
        .iter()
        .flat_map(|&family| (0..family.shards()).map(move |shard| (family, shard, String::new())))
        .collect();
    let mut built = String::new();
    for family in CANDIDATE_FAMILIES {
        let of_family = configs.iter().filter(|spec| spec.family == family);
        for (index, &spec) in of_family.enumerate() {
            let (_, _, entries) = shards
                .iter_mut()
                .find(|(shard_family, shard, _)| {
                    *shard_family == family && *shard == index % family.shards()
                })
                .expect("every family has its shards");
            writeln!(entries, "            ({spec}, {}),", SpecArgs(spec)).unwrap();
        }
    }
    for &spec in &configs {
        writeln!(built, "    built_spec!({}),", SpecArgs(spec)).unwrap();
    }
    let mut source = format!(
        "/// The kernels this build compiles: `FLASH_ATTN_KERNELS` at build time.\n\
         pub const KERNEL_SET: KernelSet = KernelSet::{set:?};\n\n\
         /// Every spec this build compiles into a PTX entry, in entry order: the shipping set,\n\
         /// or with `FLASH_ATTN_KERNELS=all` every one that passes the compile-time gates\n\
         /// ([`KERNEL_SET`] says which). Generated by `params/build.rs`.\n\
         pub const BUILT_CONFIGS: &[KernelSpec] = &[\n{built}];\n\n"
    );
    source.push_str(
        "/// Calls `$callback!` once with every spec of shard `$shard` (a literal in\n\
         /// `0..Family::shards()`) of family `$family` (a `Family` variant name) of\n\
         /// [`BUILT_CONFIGS`], as `(entry, family, dtype, variant, block_m, block_n, warps,\n\
         /// stages, head_dim, layout, q_source)`, every axis by name or literal. The shards\n\
         /// together hold every such spec once; each becomes one PTX entry.\n\
         /// Generated by `params/build.rs`.\n\
         #[macro_export]\n\
         macro_rules! for_each_kernel_entry_of_shard {\n",
    );
    for (family, shard, entries) in &shards {
        write!(
            source,
            "    ({family:?}, {shard}, $callback:ident) => {{\n        $callback! {{\n{entries}        }}\n    }};\n"
        )
        .unwrap();
    }
    source.push_str("}\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"));
    write_if_changed(&out.join("kernel_entries.rs"), &source);
}

/// Writes `text` to `path` unless it already holds it.
fn write_if_changed(path: &Path, text: &str) {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return;
    }
    std::fs::write(path, text).expect("OUT_DIR is writable");
}
