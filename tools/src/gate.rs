//! The ptxas gate of this build: the committed records the runtime was built from, and their
//! measurement again from the build's PTX modules. The rule and the file format are
//! [`flash_attn_build::gate`]'s.

use std::path::Path;

use flash_attn_build::gate::{built_module_digests, measure_gate, parse_gate_file, Gate};

/// The folder where the runtime's build wrote every gated entry's PTX module (`<entry>.ptx`,
/// exposed or not). It exists only on the machine that built the crate.
pub const BUILD_PTX_DIR: &str = env!("FLASH_ATTN_PTX_DIR");

/// `host/ptxas-gate.tsv` as the runtime was built from it: it decided
/// [`flash_attn::FORWARD_KERNELS`].
const COMMITTED_GATE_FILE: &str = include_str!("../../host/ptxas-gate.tsv");

/// The ptxas version and the records of the committed gate file.
pub fn committed_gate() -> Gate {
    parse_gate_file(COMMITTED_GATE_FILE)
        .unwrap_or_else(|error| panic!("host/ptxas-gate.tsv: {error} (the build parsed it)"))
}

/// Measures the gate with `ptxas` over the modules in [`BUILD_PTX_DIR`] of the entries that
/// `measured` accepts, in entry order: the ptxas version and one record per entry, as
/// `host/ptxas-gate.tsv` holds them.
pub fn measure_ptxas_gate(ptxas: &Path, measured: impl Fn(&str) -> bool) -> Result<Gate, String> {
    measure_gate(ptxas, Path::new(BUILD_PTX_DIR), measured)
}

/// The PTX digests of every module in [`BUILD_PTX_DIR`], per entry in entry order (one per
/// architecture of the entry's family).
pub fn built_ptx_digests() -> Result<Vec<(String, Vec<u64>)>, String> {
    built_module_digests(Path::new(BUILD_PTX_DIR))
}
