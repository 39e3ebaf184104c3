//! What `build.rs` and the crate both need: finding `ptxas` and splitting the kernels' PTX into
//! one module per entry. The build script includes this file with `#[path]`, so it may use
//! only `std`: no `crate::` items, no dependencies.

use std::path::PathBuf;

/// `$PTXAS`, else `ptxas` on `PATH`, else `/usr/local/cuda/bin/ptxas`.
pub fn find_ptxas() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PTXAS") {
        return Some(path.into());
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("ptxas"));
    on_path
        .chain([PathBuf::from("/usr/local/cuda/bin/ptxas")])
        .find(|path| path.is_file())
}

/// The names of the `.visible .entry` functions of `ptx`, in order.
// The crate looks entries up by name (`FORWARD_KERNELS`); only the build script lists them.
#[allow(dead_code)]
pub fn entry_names(ptx: &str) -> Vec<&str> {
    ptx.split(".visible .entry ")
        .skip(1)
        .filter_map(|rest| rest.split('(').next())
        .collect()
}

/// The PTX of one entry of `ptx` as a module of its own: everything before the first entry
/// (version, target, the shared-memory declaration, the panic handler) plus that entry's body.
/// `None` where `ptx` has no entry of that name.
pub fn entry_module(ptx: &str, entry: &str) -> Option<String> {
    let preamble = &ptx[..ptx.find(".visible .entry")?];
    let start = ptx.find(&format!(".visible .entry {entry}("))?;
    // An entry's body ends at the first closing brace at the start of a line.
    let end = start + ptx[start..].find("\n}\n")? + 3;
    Some(format!("{preamble}{}", &ptx[start..end]))
}
