//! The data files that name the kernels the default API runs, the shipping set: the dispatch
//! table (`host/dispatch-table.tsv`, written by the tuner), the sm_90a dispatch table
//! (`host/dispatch-table-sm90a.tsv`, consulted first on devices of compute capability 9.0) and
//! the fallback kernels (`host/fallback-kernels.txt`). `params/build.rs` includes this file (`#[path]`) and
//! compiles exactly the kernels they name unless `FLASH_ATTN_KERNELS=all`; the runtime's build
//! turns each into a Rust expression the runtime `include!`s, naming every kernel through
//! `kernel_named`, so that a file naming a kernel that is not exposed fails the build; and it
//! assembles cubins for the kernels they name.
//!
//! Only `std`: `params/build.rs` includes this file with `#[path]`.

use std::collections::HashSet;
use std::path::Path;

/// The dispatch table's columns, in the order of the runtime's `DispatchEntry` fields.
pub const DISPATCH_COLUMNS: [&str; 9] = [
    "head_dim",
    "dtype",
    "causal",
    "bucket",
    "grid",
    "kernel",
    "margin_percent",
    "confirmed",
    "measured_on",
];

/// One row of the dispatch table: a `DispatchEntry` with its enums by variant name (`F16`,
/// `UpTo128`, `Small`) and its kernel by entry name.
#[derive(Clone, Debug, PartialEq)]
pub struct DispatchRow {
    /// The head dim of the problems the row serves.
    pub head_dim: usize,
    /// The element type, a `Dtype` variant name: `F16` or `Bf16`.
    pub dtype: String,
    /// Whether the row serves causal problems.
    pub causal: bool,
    /// The key-length bucket, a `SeqBucket` variant name (`UpTo128` ... `Above2048`).
    pub bucket: String,
    /// The grid size, a `GridSize` variant name: `Small` or `Large`.
    pub grid: String,
    /// The PTX entry name of the kernel the row picks; the runtime's build fails unless it is
    /// an exposed kernel.
    pub kernel: String,
    /// How much slower the runner-up was, in percent (`DispatchEntry::margin_percent`).
    pub margin_percent: f64,
    /// Whether a rank test confirmed the win (`DispatchEntry::confirmed`).
    pub confirmed: bool,
    /// `YYYY-MM-DD, device` of the tuner run, or `not yet tuned`.
    pub measured_on: String,
}

/// The column header and one tab-separated line per row; a margin on one decimal. Tabs and
/// line breaks in `measured_on` (a device name) become spaces, so that every row stays one line
/// of nine fields.
pub fn format_dispatch_rows(rows: &[DispatchRow]) -> String {
    let mut text = format!("# {}\n", DISPATCH_COLUMNS.join("\t"));
    for row in rows {
        text.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{:.1}\t{}\t{}\n",
            row.head_dim,
            row.dtype,
            row.causal,
            row.bucket,
            row.grid,
            row.kernel,
            row.margin_percent,
            row.confirmed,
            row.measured_on.replace(['\t', '\n', '\r'], " ")
        ));
    }
    text
}

/// The rows of a dispatch table file; lines starting with `#` are comments.
///
/// ```
/// use flash_attn_build::dispatch::{format_dispatch_rows, parse_dispatch_table, DispatchRow};
///
/// let row = DispatchRow {
///     head_dim: 64,
///     dtype: "F16".into(),
///     causal: false,
///     bucket: "UpTo512".into(),
///     grid: "Small".into(),
///     kernel: "flash_fwd_f16_d64_m64_n128_w4_s2".into(),
///     margin_percent: 3.5,
///     confirmed: true,
///     measured_on: "2025-01-01, NVIDIA H100".into(),
/// };
/// let text = format_dispatch_rows(std::slice::from_ref(&row));
/// assert_eq!(parse_dispatch_table(&text).unwrap(), [row]);
/// assert!(parse_dispatch_table("64\tF16\n").unwrap_err().contains("line 1"));
/// ```
pub fn parse_dispatch_table(text: &str) -> Result<Vec<DispatchRow>, String> {
    let mut rows = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let at = |message: String| format!("line {}: {message}", number + 1);
        let fields: Vec<&str> = line.split('\t').collect();
        let [head_dim, dtype, causal, bucket, grid, kernel, margin_percent, confirmed, measured_on] =
            fields[..]
        else {
            return Err(at(format!(
                "expected {} tab-separated fields ({}), found {}",
                DISPATCH_COLUMNS.len(),
                DISPATCH_COLUMNS.join(", "),
                fields.len()
            )));
        };
        let parse_error =
            |column: &str, value: &str| at(format!("{column}: cannot parse {value:?}"));
        rows.push(DispatchRow {
            head_dim: head_dim
                .parse()
                .map_err(|_| parse_error("head_dim", head_dim))?,
            dtype: dtype.to_owned(),
            causal: causal.parse().map_err(|_| parse_error("causal", causal))?,
            bucket: bucket.to_owned(),
            grid: grid.to_owned(),
            kernel: kernel.to_owned(),
            margin_percent: margin_percent
                .parse()
                .map_err(|_| parse_error("margin_percent", margin_percent))?,
            confirmed: confirmed
                .parse()
                .map_err(|_| parse_error("confirmed", confirmed))?,
            measured_on: measured_on.to_owned(),
        });
    }
    Ok(rows)
}

/// The entry names of a fallback kernels file: one per line; lines starting with `#` are
/// comments.
pub fn parse_fallback_kernels(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// `&[DispatchEntry { ... }, ...]`, the expression `host/src/dispatch.rs` includes as its table.
/// The enums are written as paths of their variant names, and an unknown one fails to compile.
pub(crate) fn dispatch_table_expression(rows: &[DispatchRow]) -> String {
    let mut source = String::from("&[\n");
    for row in rows {
        // `{:?}` of a `&str` is a valid Rust string literal, escapes included; of an `f64`, a
        // float literal.
        source.push_str(&format!(
            "    DispatchEntry {{ head_dim: {}, dtype: Dtype::{}, causal: {}, \
             bucket: SeqBucket::{}, grid: GridSize::{}, kernel: kernel_named({:?}), \
             margin_percent: {:?}, confirmed: {}, measured_on: {:?} }},\n",
            row.head_dim,
            row.dtype,
            row.causal,
            row.bucket,
            row.grid,
            row.kernel,
            row.margin_percent,
            row.confirmed,
            row.measured_on
        ));
    }
    source.push(']');
    source
}

/// `[kernel_named("..."), ...]`, the expression `host/src/kernels.rs` includes as its fallbacks.
pub(crate) fn fallback_kernels_expression(entries: &[String]) -> String {
    let named: Vec<String> = entries
        .iter()
        .map(|entry| format!("kernel_named({entry:?})"))
        .collect();
    format!("[{}]", named.join(", "))
}

/// Reads a data file, watched by cargo.
pub(crate) fn read_data_file(path: &Path) -> String {
    println!("cargo:rerun-if-changed={}", path.display());
    std::fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()))
}

/// The folder of the data files that name the shipping set, relative to the repository root.
/// The packages read them from their own folders: `flash-attn` from its root (this folder),
/// `flash-attn-params` from `shared/`, whose links to them the package holds as files.
pub const DATA_DIR: &str = "host";
/// The dispatch table's file in [`DATA_DIR`].
pub const DISPATCH_TABLE_FILE: &str = "dispatch-table.tsv";
/// The sm_90a dispatch table's file in [`DATA_DIR`]: the same format as
/// [`DISPATCH_TABLE_FILE`], consulted first for dense problems on devices that run sm_90a PTX
/// (compute capability 9.0); a key it lacks falls back to the main table.
pub const DISPATCH_TABLE_SM90A_FILE: &str = "dispatch-table-sm90a.tsv";
/// The fallback kernels' file in [`DATA_DIR`].
pub const FALLBACK_KERNELS_FILE: &str = "fallback-kernels.txt";

/// The default API's data files, parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct DefaultApiData {
    /// [`DISPATCH_TABLE_FILE`]'s rows.
    pub dispatch: Vec<DispatchRow>,
    /// [`DISPATCH_TABLE_SM90A_FILE`]'s rows.
    pub dispatch_sm90a: Vec<DispatchRow>,
    /// [`FALLBACK_KERNELS_FILE`]'s entries.
    pub fallbacks: Vec<String>,
}

impl DefaultApiData {
    /// The shipping set ([`shipping_set`]) of both dispatch tables and the fallbacks.
    pub fn shipping_set(&self) -> Vec<String> {
        let rows: Vec<DispatchRow> = self
            .dispatch
            .iter()
            .chain(&self.dispatch_sm90a)
            .cloned()
            .collect();
        shipping_set(&rows, &self.fallbacks)
    }
}

/// The dispatch tables' rows and the fallback kernels, read from the data files in the folder
/// `data` ([`DATA_DIR`] of the checkout, or a package's copy; each file watched by cargo).
pub fn read_default_api_data(data: &Path) -> DefaultApiData {
    let table = |file: &str| {
        let path = data.join(file);
        parse_dispatch_table(&read_data_file(&path))
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
    };
    DefaultApiData {
        dispatch: table(DISPATCH_TABLE_FILE),
        dispatch_sm90a: table(DISPATCH_TABLE_SM90A_FILE),
        fallbacks: parse_fallback_kernels(&read_data_file(&data.join(FALLBACK_KERNELS_FILE))),
    }
}

/// The shipping set: every entry the dispatch table and the fallbacks name, each once, in the
/// order of first mention. A default build compiles exactly these (`params/build.rs`, which
/// includes this file, generates the entry list from them).
pub fn shipping_set(rows: &[DispatchRow], fallbacks: &[String]) -> Vec<String> {
    let mut entries: Vec<String> = Vec::new();
    for entry in rows.iter().map(|row| &row.kernel).chain(fallbacks) {
        if !entries.contains(entry) {
            entries.push(entry.clone());
        }
    }
    entries
}

/// Writes `dispatch_table.rs`, `dispatch_table_sm90a.rs` and `fallback_kernels.rs` into
/// `out_dir` from the data files in the folder `data`, and returns the entries they name: the
/// kernels the default API can run, the shipping set.
pub(crate) fn write_default_api_tables(data: &Path, out_dir: &Path) -> HashSet<String> {
    let data = read_default_api_data(data);
    for (name, expression) in [
        (
            "dispatch_table.rs",
            dispatch_table_expression(&data.dispatch),
        ),
        (
            "dispatch_table_sm90a.rs",
            dispatch_table_expression(&data.dispatch_sm90a),
        ),
        (
            "fallback_kernels.rs",
            fallback_kernels_expression(&data.fallbacks),
        ),
    ] {
        let path = out_dir.join(name);
        std::fs::write(&path, expression)
            .unwrap_or_else(|error| panic!("cannot write {}: {error}", path.display()));
    }
    data.shipping_set().into_iter().collect()
}
