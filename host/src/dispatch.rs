//! Which exposed kernel runs when the caller names none: the tuned dispatch table, keyed by
//! head dim, element type, causal masking, a bucket of the key length and the size of the grid
//! relative to the device.
//!
//! The table itself is data, `host/dispatch-table.tsv`, written by the `flash-attn-tune` tool
//! from measurements on a GPU; the build turns it into [`DISPATCH_TABLE`]. A second table of
//! the same format, `host/dispatch-table-sm90a.tsv` ([`DISPATCH_TABLE_SM90A`]), is consulted
//! first on devices that run the sm90 family's sm_90a kernels (compute capability 9.0). This
//! module defines their entries and looks problems up in them.

use flash_attn_params::{ptx_target_for, Dtype, Family};

use crate::kernels::{default_kernel, kernel_named, SUPPORTED_HEAD_DIMS};
use crate::{AttentionShape, Error, ForwardKernel};

/// `host/dispatch-table.tsv`, one entry per row, in its order: the build writes each row as a
/// [`DispatchEntry`] whose kernel it names with [`kernel_named`], so a table naming a kernel
/// that is not exposed fails the build, as does an unknown variant name.
const DISPATCH_TABLE: &[DispatchEntry] = include!(concat!(env!("OUT_DIR"), "/dispatch_table.rs"));

/// `host/dispatch-table-sm90a.tsv`, built as [`DISPATCH_TABLE`] is: the dense problems' table on
/// devices that run the sm90 family ([`dispatch_kernel_on`]), ahead of [`DISPATCH_TABLE`].
const DISPATCH_TABLE_SM90A: &[DispatchEntry] =
    include!(concat!(env!("OUT_DIR"), "/dispatch_table_sm90a.rs"));

/// A range of key lengths (`seq_len_kv`) that shares one dispatch entry. The bounds follow the
/// tuner's sweep: one measured sequence length falls in each bucket.
///
/// ```
/// use flash_attn::SeqBucket;
///
/// assert_eq!(SeqBucket::of(512), SeqBucket::UpTo512);
/// assert_eq!(SeqBucket::of(513), SeqBucket::UpTo1024);
/// assert_eq!(SeqBucket::of(1 << 20).upper_bound(), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SeqBucket {
    /// `seq_len_kv <= 128`.
    UpTo128,
    /// `128 < seq_len_kv <= 256`.
    UpTo256,
    /// `256 < seq_len_kv <= 512`.
    UpTo512,
    /// `512 < seq_len_kv <= 1024`.
    UpTo1024,
    /// `1024 < seq_len_kv <= 2048`.
    UpTo2048,
    /// `seq_len_kv > 2048`.
    Above2048,
}

impl SeqBucket {
    /// Every bucket, from the shortest key lengths to the longest.
    pub const ALL: [SeqBucket; 6] = [
        SeqBucket::UpTo128,
        SeqBucket::UpTo256,
        SeqBucket::UpTo512,
        SeqBucket::UpTo1024,
        SeqBucket::UpTo2048,
        SeqBucket::Above2048,
    ];

    /// The bucket of a key length.
    pub fn of(seq_len_kv: usize) -> Self {
        Self::ALL
            .into_iter()
            .find(|bucket| {
                bucket
                    .upper_bound()
                    .is_some_and(|bound| seq_len_kv <= bound)
            })
            .unwrap_or(SeqBucket::Above2048)
    }

    /// The largest key length in the bucket; `None` for the last, which is unbounded.
    pub fn upper_bound(self) -> Option<usize> {
        match self {
            SeqBucket::UpTo128 => Some(128),
            SeqBucket::UpTo256 => Some(256),
            SeqBucket::UpTo512 => Some(512),
            SeqBucket::UpTo1024 => Some(1024),
            SeqBucket::UpTo2048 => Some(2048),
            SeqBucket::Above2048 => None,
        }
    }

    /// A short human-readable name: `<=128` ... `>2048`.
    pub fn label(self) -> &'static str {
        match self {
            SeqBucket::UpTo128 => "<=128",
            SeqBucket::UpTo256 => "<=256",
            SeqBucket::UpTo512 => "<=512",
            SeqBucket::UpTo1024 => "<=1024",
            SeqBucket::UpTo2048 => "<=2048",
            SeqBucket::Above2048 => ">2048",
        }
    }
}

/// Query rows per tile when [`GridSize`] counts a problem's tiles: the smallest `block_m` of the
/// exposed kernels, so that the count does not depend on the kernel it helps to choose.
pub const GRID_TILE_ROWS: usize = 64;

/// The most 64-row query tiles per multiprocessor for which a grid is [`GridSize::Small`].
///
/// The boundary sits between the two kinds of S=512 shapes the tuner measured on the H100 (132
/// SMs): the seed shape 4,8,512 has 256 tiles, 1.9 per SM, and there `m64_n128_w4_s2` was the
/// fastest kernel; 16,16,512 has 2048 tiles (15.5 per SM) and 32,16,512 4096, and there
/// `m64_n64_w4_s3` won by 8%. With a few tiles per SM every block runs in the first wave
/// (three to four D=64 blocks fit on an SM at once), so the time is one block's latency;
/// with many, the SMs' throughput over several waves. 4 leaves both shapes a factor of two
/// or more from the boundary.
pub const SMALL_GRID_TILES_PER_SM: usize = 4;

/// How many query tiles a problem launches relative to the device's multiprocessors: a
/// dimension of the dispatch key, because the best kernel for a grid that fills the GPU only
/// once is not the best for one that fills it many times over (see
/// [`SMALL_GRID_TILES_PER_SM`]).
///
/// ```
/// use flash_attn::{AttentionShape, GridSize};
///
/// // 4 * 8 * (512 / 64) = 256 tiles: 1.9 per SM of an H100 SXM (132 SMs).
/// let seed = AttentionShape::new(4, 8, 512, 64);
/// assert_eq!(GridSize::query_tiles(&seed), 256);
/// assert_eq!(GridSize::of(&seed, 132), GridSize::Small);
/// assert_eq!(GridSize::of(&AttentionShape::new(16, 16, 512, 64), 132), GridSize::Large);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GridSize {
    /// At most [`SMALL_GRID_TILES_PER_SM`] tiles of [`GRID_TILE_ROWS`] query rows per SM: about
    /// one wave of blocks, bound by the latency of a block.
    Small,
    /// More tiles than that: several waves, bound by throughput.
    Large,
}

impl GridSize {
    /// Both sizes, in the dispatch table's order.
    pub const ALL: [GridSize; 2] = [GridSize::Small, GridSize::Large];

    /// The grid size of `shape` on a device of `sm_count` multiprocessors, from its
    /// [`query_tiles`](Self::query_tiles).
    pub fn of(shape: &AttentionShape, sm_count: usize) -> Self {
        if Self::query_tiles(shape) <= SMALL_GRID_TILES_PER_SM.saturating_mul(sm_count) {
            GridSize::Small
        } else {
            GridSize::Large
        }
    }

    /// The tiles of [`GRID_TILE_ROWS`] query rows in `shape`:
    /// `batch * heads_q * ceil(seq_len_q / 64)` (saturating, for shapes not yet validated).
    pub fn query_tiles(shape: &AttentionShape) -> usize {
        shape
            .batch
            .saturating_mul(shape.heads_q)
            .saturating_mul(shape.seq_len_q.div_ceil(GRID_TILE_ROWS))
    }

    /// The other size: where the table has no entry for a key, the entry of the same key with
    /// the other grid size is a better guess than the untuned default.
    pub fn other(self) -> Self {
        match self {
            GridSize::Small => GridSize::Large,
            GridSize::Large => GridSize::Small,
        }
    }

    /// `small-grid` or `large-grid`, for reports and the tuner's JSON.
    pub fn label(self) -> &'static str {
        match self {
            GridSize::Small => "small-grid",
            GridSize::Large => "large-grid",
        }
    }
}

/// `measured_on` of an entry that no tuner run has measured.
pub const NOT_TUNED: &str = "not yet tuned";

/// One row of the dispatch table: the kernel for problems of this head dim, element type,
/// masking, key-length bucket and grid size, and the evidence for it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DispatchEntry {
    /// The head dim of the problems the entry serves.
    pub head_dim: usize,
    /// Their element type.
    pub dtype: Dtype,
    /// Whether they are causal.
    pub causal: bool,
    /// The bucket of their key length ([`SeqBucket::of`]).
    pub bucket: SeqBucket,
    /// Their grid size relative to the device ([`GridSize::of`]).
    pub grid: GridSize,
    /// The kernel, one of `FORWARD_KERNELS`: the generated table resolves it by name at compile
    /// time ([`crate::kernel_named`]), so a launch never looks a name up.
    pub kernel: &'static ForwardKernel,
    /// How much slower (in percent of the entry's median time) the runner-up was at the
    /// group's representative shape when the tuner confirmed the win; 0 when the two were tied
    /// within the noise or there was no runner-up.
    pub margin_percent: f64,
    /// Whether a rank test on interleaved re-timings confirmed the entry faster than the
    /// runner-up. `false` for ties, for a single candidate, and for entries not yet tuned.
    pub confirmed: bool,
    /// `YYYY-MM-DD, device` of the tuner run that chose the entry, or [`NOT_TUNED`].
    pub measured_on: &'static str,
}

/// The dispatch table compiled into this crate (`host/dispatch-table.tsv`), in the order the
/// tuner writes it.
pub fn dispatch_table() -> &'static [DispatchEntry] {
    DISPATCH_TABLE
}

/// The sm_90a dispatch table compiled into this crate (`host/dispatch-table-sm90a.tsv`), which
/// [`dispatch_kernel_on`] consults first on devices of compute capability 9.0.
pub fn dispatch_table_sm90a() -> &'static [DispatchEntry] {
    DISPATCH_TABLE_SM90A
}

/// Every kernel the default API can run, in [`crate::FORWARD_KERNELS`] order: those the
/// compiled dispatch tables name and the fallbacks ([`default_kernel`]). The build assembles
/// cubins for these.
pub fn default_api_kernels() -> Vec<&'static ForwardKernel> {
    let mut kernels: Vec<&'static ForwardKernel> = DISPATCH_TABLE
        .iter()
        .chain(DISPATCH_TABLE_SM90A)
        .map(|entry| entry.kernel)
        .collect();
    for dtype in [Dtype::F16, Dtype::Bf16] {
        for &head_dim in SUPPORTED_HEAD_DIMS {
            kernels.extend(default_kernel(dtype, head_dim));
        }
    }
    kernels.sort_by_key(|kernel| kernel.index());
    kernels.dedup();
    kernels
}

/// The entry of `table` for `shape` on a device of `sm_count` multiprocessors: the one keyed
/// `(kernel head dim, dtype, causal, SeqBucket::of(seq_len_kv), GridSize::of(shape, sm_count))`
/// (the kernel head dim the problem's pads to, [`flash_attn_params::padded_head_dim`]), else
/// the one of the same key with the other grid size, else `None`. [`dispatch_kernel`] looks
/// problems up in the compiled [`dispatch_table`] this way.
pub fn dispatch_entry<'t>(
    table: &'t [DispatchEntry],
    dtype: Dtype,
    shape: &AttentionShape,
    causal: bool,
    sm_count: usize,
) -> Option<&'t DispatchEntry> {
    let head_dim = flash_attn_params::padded_head_dim(shape.head_dim)?;
    let bucket = SeqBucket::of(shape.seq_len_kv);
    let grid = GridSize::of(shape, sm_count);
    // A linear scan: the table has a few dozen entries, against microseconds per launch.
    let entry = |grid| {
        table.iter().find(|entry| {
            entry.dtype == dtype
                && entry.head_dim == head_dim
                && entry.causal == causal
                && entry.bucket == bucket
                && entry.grid == grid
        })
    };
    entry(grid).or_else(|| entry(grid.other()))
}

/// The dense kernel of the dispatch table for `shape` on a device of `sm_count`
/// multiprocessors: that of the compiled table's [`dispatch_entry`], or where the table has
/// none, the fallback kernel of the element type and head dim ([`default_kernel`]), or its
/// error (a head dim that is not a multiple of 8 from 8 to 256). It is the kernel the default
/// API runs for a plain problem of a head dim with kernels of its own; a head dim without runs
/// padded on a modified kernel of the head dim it pads to ([`crate::modified_kernel`], which
/// picks that kernel's tile by this one), and here gets the dense kernel of that head dim,
/// which runs its own head dim only. [`crate::plan`] says which kernel runs any problem.
///
/// Allocates nothing: a scan of the table, whose entries hold their kernels.
///
/// ```
/// use flash_attn::{dispatch_kernel, AttentionShape, Dtype, Error, Variant};
///
/// let kernel = dispatch_kernel(Dtype::Bf16, &AttentionShape::new(4, 8, 512, 128), true, 132)?;
/// assert_eq!((kernel.spec.dtype, kernel.spec.variant), (Dtype::Bf16, Variant::Dense));
/// assert_eq!(kernel.spec.tile.head_dim, 128);
/// // Head dim 80 pads to 96: the table's dense D=96 kernel, whose tile the modified kernel that
/// // runs it follows; 100 is not a multiple of 8.
/// let shape = AttentionShape::new(1, 1, 64, 80);
/// let padded = dispatch_kernel(Dtype::F16, &shape, false, 132)?;
/// assert_eq!((padded.spec.tile.head_dim, padded.spec.variant), (96, Variant::Dense));
/// let runs = flash_attn::plan(Dtype::F16, &shape, &Default::default(), 132)?.kernel();
/// assert_eq!((runs.spec.tile.head_dim, runs.spec.variant), (96, Variant::Modified));
/// assert_eq!(
///     dispatch_kernel(Dtype::F16, &AttentionShape::new(1, 1, 64, 100), false, 132),
///     Err(Error::InvalidHeadDim { head_dim: 100 })
/// );
/// # Ok::<(), Error>(())
/// ```
pub fn dispatch_kernel(
    dtype: Dtype,
    shape: &AttentionShape,
    causal: bool,
    sm_count: usize,
) -> Result<&'static ForwardKernel, Error> {
    match dispatch_entry(DISPATCH_TABLE, dtype, shape, causal, sm_count) {
        Some(entry) => Ok(entry.kernel),
        None => default_kernel(dtype, shape.head_dim),
    }
}

/// [`dispatch_kernel`] on a device of `compute_capability`, what the default API runs for a
/// dense problem: on a device that runs the sm90 family ([`ptx_target_for`]: compute capability
/// 9.0) the entry of the sm_90a table ([`dispatch_table_sm90a`]) where it has one for the
/// problem's key (either grid size, as [`dispatch_entry`] looks up) and its kernel runs on the
/// device; otherwise [`dispatch_kernel`].
///
/// ```
/// use flash_attn::{dispatch_kernel, dispatch_kernel_on, AttentionShape, Dtype};
///
/// // An A100 (8.0) never consults the sm_90a table.
/// let shape = AttentionShape::new(4, 8, 512, 128);
/// assert_eq!(
///     dispatch_kernel_on(Dtype::F16, &shape, true, 108, (8, 0))?,
///     dispatch_kernel(Dtype::F16, &shape, true, 108)?
/// );
/// # Ok::<(), flash_attn::Error>(())
/// ```
pub fn dispatch_kernel_on(
    dtype: Dtype,
    shape: &AttentionShape,
    causal: bool,
    sm_count: usize,
    compute_capability: (i32, i32),
) -> Result<&'static ForwardKernel, Error> {
    if ptx_target_for(Family::Sm90, compute_capability).is_some() {
        let entry = dispatch_entry(DISPATCH_TABLE_SM90A, dtype, shape, causal, sm_count);
        if let Some(entry) = entry.filter(|entry| entry.kernel.runs_on(compute_capability)) {
            return Ok(entry.kernel);
        }
    }
    dispatch_kernel(dtype, shape, causal, sm_count)
}
