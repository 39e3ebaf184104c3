//! A forward kernel named by its axes ([`KernelSpec`]): the main loop's family, the element
//! type, the variant of the main loop and the tile (head dim included); the candidate space of
//! specs, the PTX entry name of each, and which of them a build compiles ([`KernelSet`]).
//!
//! Only `core`: the crate re-exports it, and `build.rs` includes this file with `#[path]` (as it
//! does `tile.rs`) to generate the list of entries, so that the list, the space and the names
//! have one implementation.

use core::fmt;

pub use crate::arch::Family;
use crate::tile::{
    for_each_tile_candidate, sm90_overlaps_blocks, QSource, SmemLayout, TileConfig,
    SM90_PIPELINE_BARRIER_BYTES, SM90_PRODUCER_WARPS, SM90_WARPGROUP_ROWS, TMA_BOX_COLUMNS,
};

// `Family` is defined beside the architecture table that gives each family its PTX targets
// (`arch.rs`, which needs nothing of this file); what it means for specs is here.
impl Family {
    /// What the family appends to its entry names: nothing for [`Family::Sm80`] (the names
    /// predate the axis), `_sm90a` for [`Family::Sm90`].
    pub const fn name_suffix(self) -> &'static str {
        match self {
            Family::Sm80 => "",
            Family::Sm90 => "_sm90a",
        }
    }

    /// Whether the family's main loop implements `variant`: every variant but
    /// the single-modifier ones ([`Variant::Alibi`], [`Variant::Softcap`]) for [`Family::Sm80`];
    /// [`Variant::Dense`], [`Variant::Modified`], the single-modifier ones, [`Variant::Serving`]
    /// and [`Variant::Paged`] (unsplit, without modifiers: [`SM90_SERVING_TILES`]) for
    /// [`Family::Sm90`].
    pub const fn has_variant(self, variant: Variant) -> bool {
        match self {
            Family::Sm80 => !variant.is_one_modifier(),
            Family::Sm90 => {
                matches!(
                    variant,
                    Variant::Dense | Variant::Modified | Variant::Serving | Variant::Paged
                ) || variant.is_one_modifier()
            }
        }
    }

    /// Whether the family's tiles fix the layout and the Q source ([`Family::Sm90`]'s are
    /// always swizzled, Q in shared memory), so that its entry names leave them out.
    const fn fixes_layout_and_q_source(self) -> bool {
        matches!(self, Family::Sm90)
    }

    /// How many shard crates compile the family's entries, round-robin in entry order: the
    /// crates `kernels-gpu/shards/<`[`Self::shard_dir_prefix`]`><n>`, which cargo builds in
    /// parallel. rustc's nvptx backend emits one PTX file per crate whatever the codegen units,
    /// and LLVM takes ~0.3 s per entry, so one crate of 320 entries took 100 s on one core.
    pub const fn shards(self) -> usize {
        match self {
            Family::Sm80 => 4,
            Family::Sm90 => 2,
        }
    }

    /// The folder-name prefix of the family's shard crates under `kernels-gpu/shards/`
    /// (`shard-0`, `sm90a-shard-0`); each crate's name is `flash-attn-kernels-` and its folder's.
    pub const fn shard_dir_prefix(self) -> &'static str {
        match self {
            Family::Sm80 => "shard-",
            Family::Sm90 => "sm90a-shard-",
        }
    }
}

/// The element type of Q, K, V and O.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// IEEE 754 half precision (`half::f16`).
    F16,
    /// bfloat16 (`half::bf16`).
    Bf16,
}

impl Dtype {
    /// `f16` or `bf16`: in entry names, reports and the tools' files.
    pub const fn name(self) -> &'static str {
        match self {
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
        }
    }
}

/// What a family's main loop does to the scores besides the softmax, and where its rows come
/// from: each value a compile-time specialisation of the main loop, so that a problem does not
/// pay for what it does not use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// No score modifier beyond the causal mask (a run-time switch,
    /// [`ForwardParams::causal`](crate::ForwardParams::causal)).
    Dense,
    /// [`Variant::Dense`] for serving: its entries take [`ServingParams`](crate::ServingParams)
    /// and add, as run-time switches that the dense kernels never pay for, variable-length
    /// batches (sequence offsets), a key length per sequence (a KV cache), and split-KV (the
    /// key range over several blocks, combined by the last of them). Entry names end in
    /// `_serving`; its tiles are its entries of [`SERVING_TILES`], one to three per head dim.
    Serving,
    /// [`Variant::Serving`] over a paged K/V cache (a block table of pages; see
    /// [`SequenceParams::block_table`](crate::SequenceParams::block_table)), a variant of its own
    /// so that neither pays for the other's addressing: with both copy paths in one kernel the
    /// D=128 entries spilled (144-byte stack frame, sm_89). Entry names end in `_paged`; its
    /// tiles are its entries of [`SERVING_TILES`], one or two per head dim.
    Paged,
    /// [`Variant::Dense`] with the score modifiers: a sliding window (both ends of each query's
    /// key range, the key blocks wholly outside it skipped), a softcap and ALiBi biases. Its
    /// entries take [`ModifiedParams`](crate::ModifiedParams); each modifier is a run-time
    /// switch (a warp-uniform branch per key block), so that one kernel runs every combination,
    /// and the dense kernels pay for none of them. Entry names end in `_mod`; its tiles are
    /// [`MODIFIED_TILES`].
    Modified,
    /// [`Variant::Serving`] with the score modifiers of [`Variant::Modified`] (a window, a
    /// softcap, ALiBi), for KV-cache and variable-length calls that ask for one: a variant of
    /// its own, so that the serving kernels pay nothing for them. Its entries take
    /// [`ModifiedServingParams`](crate::ModifiedServingParams); names end in `_serving_mod`;
    /// its tiles are its entries of [`SERVING_TILES`].
    ServingModified,
    /// [`Variant::Paged`] with the score modifiers, as [`Variant::ServingModified`] is
    /// [`Variant::Serving`] with them. Entry names end in `_paged_mod`.
    PagedModified,
    /// [`Variant::Dense`] with ALiBi biases always on and no other modifier: the dense loop
    /// (no window, no softcap, no run-time switch) for the problems whose only modifier is
    /// ALiBi, its key blocks visited as suits ALiBi's bias (the row's diagonal block first, see
    /// the GPU crate's `attn::mask`). Its entries take [`ModifiedParams`](crate::ModifiedParams)
    /// and read only the ALiBi fields; a [`Variant::Modified`] kernel runs the same problems
    /// ([`Variant::runs_problems_of`]). Why a variant of its own: with every modifier off the
    /// sm90 modified kernel ran 11-16% more instructions than the plain one at D=64 (the
    /// switches, the window's limits, each warpgroup's own key range: BENCHMARKS.md log 65),
    /// which ALiBi alone does not need; over the plain kernel ALiBi took 1.01-1.15x here against
    /// 1.01-1.26x on the modified kernel (log 66). Entry names end in `_alibi`; its tiles are
    /// [`SM90_ONE_MODIFIER_TILES`], of the sm90 family only.
    Alibi,
    /// [`Variant::Alibi`]'s counterpart for the softcap: the dense loop with the softcap on
    /// every block and no other modifier (Gemma 2's global layers, Grok), for the same reason:
    /// over the plain kernel the softcap took 1.15-1.45x here against 1.17-1.44x on the
    /// modified kernel, 2-11% faster but at 8,16,2048,64 non-causal, 3-4% slower there
    /// (BENCHMARKS.md log 67). Entry names end in `_softcap`; its tiles are
    /// [`SM90_ONE_MODIFIER_TILES`].
    Softcap,
}

impl Variant {
    /// Whether the variant's entries take [`ServingParams`](crate::ServingParams) rather than
    /// [`ForwardParams`](crate::ForwardParams).
    pub const fn is_serving(self) -> bool {
        matches!(
            self,
            Variant::Serving | Variant::Paged | Variant::ServingModified | Variant::PagedModified
        )
    }

    /// Whether the variant's entries take [`ModifiedParams`](crate::ModifiedParams): the score
    /// modifiers.
    pub const fn is_modified(self) -> bool {
        matches!(
            self,
            Variant::Modified
                | Variant::ServingModified
                | Variant::PagedModified
                | Variant::Alibi
                | Variant::Softcap
        )
    }

    /// Whether the variant is the dense loop with one score modifier always on
    /// ([`Variant::Alibi`], [`Variant::Softcap`]): what a [`Variant::Modified`] kernel runs
    /// too, with that modifier's switch on.
    pub const fn is_one_modifier(self) -> bool {
        matches!(self, Variant::Alibi | Variant::Softcap)
    }

    /// Whether the variant's kernels run the problems that a kernel of `needed` runs: its own,
    /// and [`Variant::Modified`]'s also those of the single-modifier variants
    /// ([`Variant::is_one_modifier`]: their modifier as one of its run-time switches).
    pub const fn runs_problems_of(self, needed: Variant) -> bool {
        self as u8 == needed as u8
            || (matches!(self, Variant::Modified) && needed.is_one_modifier())
    }

    /// The variant that runs the same problems with the score modifiers: itself where it has
    /// them.
    pub const fn with_modifiers(self) -> Variant {
        match self {
            Variant::Dense | Variant::Modified | Variant::Alibi | Variant::Softcap => {
                Variant::Modified
            }
            Variant::Serving | Variant::ServingModified => Variant::ServingModified,
            Variant::Paged | Variant::PagedModified => Variant::PagedModified,
        }
    }

    /// Whether the shipping set holds the variant's whole candidate space: every variant but
    /// [`Variant::Dense`], whose hundreds of tiles the dispatch data choose among, while the
    /// others have a few tiles each that the host picks at run time.
    pub const fn ships_whole(self) -> bool {
        !matches!(self, Variant::Dense)
    }

    /// Whether the variant reads K and V through a block table of pages.
    pub const fn is_paged(self) -> bool {
        matches!(self, Variant::Paged | Variant::PagedModified)
    }
}

/// The tiles of the serving kernels ([`Variant::Serving`], [`Variant::Paged`] and their
/// modified forms), the one rule for every head dim: each entry is a variant and one of its tiles (head dim included), in entry order
/// within each variant (head dim, then `block_m`, `block_n`, warps, stages, layout, Q source).
/// The shipping set holds them all, so the list stays short: one 64-row tile per variant and
/// head dim (two at D=64), and one 128-row serving tile at D=64 and D=128, each one that ptxas
/// assembles without a spill or a stack frame on sm_80, sm_89 and sm_90 at both element types
/// (BENCHMARKS.md log 32). Of a variant's tiles at the kernel head dim a problem runs on, the
/// host runs those with the rows per block of the dense dispatch table's kernel for the problem
/// (where each sequence has that many query rows; else the 64-row ones), the one with the most
/// stages of them (`flash_attn::serving_kernel`).
///
/// - D=64 and D=128: the dense fallbacks' tiles (m64 n64, 4 warps, 2 or 3 stages, swizzled),
///   which serve short queries and decode (3 stages at D=128 need 112 KiB). Serving kernels
///   hold Q in registers; paged ones re-read it from shared memory: with Q in registers, their
///   per-row page lookups grew the D=128 dim-step loop past LLVM's unroll threshold and the Q
///   fragments went to local memory (a 136-byte stack frame, sm_89), and with the prefetch
///   moved out of that loop they spilled 28 bytes at 255 registers. These kernels do not pad
///   ([`pads_head_dim`]).
/// - D=64 and D=128, serving only: a 128-row tile of 4 warps (32 rows each, the padded layout)
///   for long prefills, where the dense table picks 128-row tiles. At D=128 the table's pick
///   when it was chosen, `m128_n32_w4_s3_pad_qsmem` (255 registers on sm_80, sm_89 and sm_90,
///   no spill, 85 KiB; the table now picks `m128_n64_w4_s1_qsmem`, BENCHMARKS.md log 40);
///   at D=64 `m128_n64_w4_s2_pad` (253-255 registers, no spill, 54 KiB), as fast as the table's
///   `m128_n64_w4_s3` in the tuner's dense screening on the H100 (342 against 344 TFLOP/s at
///   2x16x4096), which spilled as a serving kernel (8-16 bytes on all three; `_s3_pad` 4 bytes
///   on sm_80 and sm_89, and `m128_n128_w8_s2` 4-8 bytes on sm_80 and sm_90; `_s2_qsmem`,
///   `_s3_qsmem` and `_s3_pad_qsmem` passed but were slower dense). The 8-warp tiles of 16 rows
///   per warp passed too (D=128: `m128_n32_w8_s3` 228-247 registers, `m128_n64_w8_s2_qsmem`
///   254-255; D=64: `m128_n64_w8_s2`/`_s3` 167-200; `m128_n64_w8_s2` at D=128 spilled 20-24
///   bytes on sm_89 and sm_90) but were slower than the 64-row tile in the dense screening
///   (D=128, 2x16x4096: `m128_n32_w8_s3` 272 and `m128_n64_w8_s2` 327 TFLOP/s, against 334 for
///   `m64_n64_w4_s2` and 370 for `m128_n32_w4_s3_pad_qsmem`).
/// - The other head dims pad, as the modified kernels do (a problem of a head dim without
///   kernels of its own runs on the next kernel head dim's): the padded layout where rows are
///   not whole 128-byte swizzle groups (32, 96, 160, 224), 16 rows per warp (4 warps, m64), and
///   the most K/V stages that fit 99 KiB and pass ptxas. Q stays in registers at D=32 and D=96
///   only: from D=160 on the serving kernels re-read it from shared memory as the paged ones do
///   (at D=160 Q in registers took 252-255 registers, at D=192 and above it spilled 8-416
///   bytes). At D=192 and D=256 the key blocks are 16 keys (a `block_n` outside the dense
///   grid): with 32 keys every serving and paged tile of D=256 spilled (8-416 bytes), and 16
///   keys leave the shared memory for three stages, which decode (bound by the latency of its
///   copies) wants more than long key blocks. D=160 and D=224 cannot take 16-key blocks (their
///   rows of 20 and 28 chunks split into copies of 32 rows per pass). The paged D=256 kernel
///   has one stage: with two or three it spilled 8 bytes on sm_80.
/// - The paged D=128 tile takes 32-key blocks and three stages (`m64_n32_w4_s3_qsmem`,
///   210-223 registers): the per-tile page lookup (a tile within one page looks its page up
///   once, not once per row) spilled the 64-key, two-stage tile (120 bytes on sm_80, 8 on
///   sm_90). With it a paged B=1 decode over 32,768 keys costs 1.02-1.04x the contiguous
///   cache's time at pages of 64 and 256 keys, against 1.05-1.07x before (BENCHMARKS.md log 35).
/// - [`Variant::ServingModified`] and [`Variant::PagedModified`] (the score modifiers on the
///   serving calls): the tile of their unmodified variant with the most stages, but at D=128,
///   where the modifiers' registers spilled that tile: the serving one re-reads Q from shared
///   memory (with Q in registers: 255 registers, 24 bytes spilled, sm_89 and sm_90), the paged
///   one takes 32-key blocks and three stages (m64 n64 with two: 28 bytes spilled on sm_80;
///   m64 n32: 214-227 registers, no spill).
pub const SERVING_TILES: [(Variant, TileConfig); 36] = {
    use QSource::{Registers, SharedMemory};
    use SmemLayout::{Padded, Swizzled};
    use Variant::{Paged, PagedModified, Serving, ServingModified};
    const fn tile(
        (block_m, block_n, warps, stages): (usize, usize, usize, usize),
        head_dim: usize,
        layout: SmemLayout,
        q_source: QSource,
    ) -> TileConfig {
        TileConfig::new(block_m, block_n, warps, stages, head_dim, layout, q_source)
    }
    [
        (Serving, tile((64, 64, 4, 3), 32, Padded, Registers)),
        (Paged, tile((64, 64, 4, 3), 32, Padded, SharedMemory)),
        (ServingModified, tile((64, 64, 4, 3), 32, Padded, Registers)),
        (
            PagedModified,
            tile((64, 64, 4, 3), 32, Padded, SharedMemory),
        ),
        (Serving, tile((64, 64, 4, 2), 64, Swizzled, Registers)),
        (Serving, tile((64, 64, 4, 3), 64, Swizzled, Registers)),
        (Serving, tile((128, 64, 4, 2), 64, Padded, Registers)),
        (Paged, tile((64, 64, 4, 2), 64, Swizzled, SharedMemory)),
        (Paged, tile((64, 64, 4, 3), 64, Swizzled, SharedMemory)),
        (
            ServingModified,
            tile((64, 64, 4, 3), 64, Swizzled, Registers),
        ),
        (
            PagedModified,
            tile((64, 64, 4, 3), 64, Swizzled, SharedMemory),
        ),
        (Serving, tile((64, 64, 4, 3), 96, Padded, Registers)),
        (Paged, tile((64, 64, 4, 3), 96, Padded, SharedMemory)),
        (ServingModified, tile((64, 64, 4, 3), 96, Padded, Registers)),
        (
            PagedModified,
            tile((64, 64, 4, 3), 96, Padded, SharedMemory),
        ),
        (Serving, tile((64, 64, 4, 2), 128, Swizzled, Registers)),
        (Serving, tile((128, 32, 4, 3), 128, Padded, SharedMemory)),
        (Paged, tile((64, 32, 4, 3), 128, Swizzled, SharedMemory)),
        (
            ServingModified,
            tile((64, 64, 4, 2), 128, Swizzled, SharedMemory),
        ),
        (
            PagedModified,
            tile((64, 32, 4, 3), 128, Swizzled, SharedMemory),
        ),
        (Serving, tile((64, 32, 4, 3), 160, Padded, SharedMemory)),
        (Paged, tile((64, 32, 4, 3), 160, Padded, SharedMemory)),
        (
            ServingModified,
            tile((64, 32, 4, 3), 160, Padded, SharedMemory),
        ),
        (
            PagedModified,
            tile((64, 32, 4, 3), 160, Padded, SharedMemory),
        ),
        (Serving, tile((64, 16, 4, 3), 192, Swizzled, SharedMemory)),
        (Paged, tile((64, 16, 4, 3), 192, Swizzled, SharedMemory)),
        (
            ServingModified,
            tile((64, 16, 4, 3), 192, Swizzled, SharedMemory),
        ),
        (
            PagedModified,
            tile((64, 16, 4, 3), 192, Swizzled, SharedMemory),
        ),
        (Serving, tile((64, 32, 4, 2), 224, Padded, SharedMemory)),
        (Paged, tile((64, 32, 4, 2), 224, Padded, SharedMemory)),
        (
            ServingModified,
            tile((64, 32, 4, 2), 224, Padded, SharedMemory),
        ),
        (
            PagedModified,
            tile((64, 32, 4, 2), 224, Padded, SharedMemory),
        ),
        (Serving, tile((64, 16, 4, 3), 256, Swizzled, SharedMemory)),
        (Paged, tile((64, 16, 4, 1), 256, Swizzled, SharedMemory)),
        (
            ServingModified,
            tile((64, 16, 4, 3), 256, Swizzled, SharedMemory),
        ),
        (
            PagedModified,
            tile((64, 16, 4, 1), 256, Swizzled, SharedMemory),
        ),
    ]
};

/// The tiles of the [`Variant::Modified`] kernels: those that the dense dispatch table
/// (`host/dispatch-table.tsv`) picks at the anchor shapes on the H100, where the issue's timing
/// targets are set (a modifier at most 5% slower than the plain kernel: the same tile, so that
/// only the modifiers' cost is compared), and for long causal prefills (the sliding window's
/// shapes: `m128_n64_w4_s3` at D=64, `m64_n64_w4_s2` at D=128). The host runs the dispatch
/// table's tile where a modified kernel of it exists, else the head dim's first here
/// (`flash_attn::modified_kernel`), so a tile added here is picked up without other change.
/// The shipping set holds them all (each at both element types), so that the cold build stays
/// small: keep the list short. Not `m128_n128_w8_s2`, the table's tile for small grids at D=64
/// (the seed shape): its modified entries, three key loops of 8 key steps each, tipped LLVM's
/// inliner into outlining `core::array::from_fn` of the softmax's row maximum, an instance that
/// all the shard's entries of 8 key steps share, with a bounds-check panic that ptxas cannot
/// link (dense entries included).
///
/// The other head dims have one tile each, their fallback kernel's or the fastest measured
/// (at 96; at 256 the 8-warp tile: the fallback's 4-warp one spilled as a modified kernel),
/// which also runs the dense problems of the head dims padded to it.
pub const MODIFIED_TILES: [TileConfig; 10] = [
    TileConfig::new(64, 64, 4, 3, 32, SmemLayout::Padded, QSource::Registers),
    TileConfig::new(128, 64, 4, 2, 96, SmemLayout::Padded, QSource::SharedMemory),
    TileConfig::new(64, 32, 4, 2, 160, SmemLayout::Padded, QSource::Registers),
    TileConfig::new(
        64,
        32,
        4,
        2,
        192,
        SmemLayout::Swizzled,
        QSource::SharedMemory,
    ),
    TileConfig::new(64, 32, 4, 2, 224, SmemLayout::Padded, QSource::SharedMemory),
    TileConfig::new(
        128,
        32,
        8,
        1,
        256,
        SmemLayout::Swizzled,
        QSource::SharedMemory,
    ),
    TileConfig::new(128, 64, 4, 3, 64, SmemLayout::Swizzled, QSource::Registers),
    TileConfig::new(64, 64, 4, 3, 64, SmemLayout::Swizzled, QSource::Registers),
    TileConfig::new(64, 64, 4, 2, 128, SmemLayout::Swizzled, QSource::Registers),
    TileConfig::new(
        128,
        64,
        4,
        1,
        128,
        SmemLayout::Swizzled,
        QSource::SharedMemory,
    ),
];

/// The tiles of the sm90 family's [`Variant::Modified`] kernels (swizzled, Q in shared
/// memory, as every sm90 tile): those of the sm_90a dispatch table
/// (`host/dispatch-table-sm90a.tsv`), so that a modified problem runs the plain problem's tile
/// on a device of compute capability 9.0 and only the modifiers' cost separates the two (the
/// issue's target); at D=224 and D=256 their one-stage forms, the table's two-stage tiles having
/// spilled as modified kernels (255 registers, a 112- and a 184-byte stack, sm_90a). At D=160,
/// 192 and 224 the table has run the warp-specialised tiles since BENCHMARKS.md log 46 (1.08-1.34x
/// faster than the 8-warp ones here); their modified kernels are not in the space yet, so the
/// modified problems of those head dims run the 8-warp tiles listed here. At D=128
/// the table's tile is warp-specialised (a producer warpgroup, BENCHMARKS.md log 45); its
/// modified kernel ran softcap, ALiBi and the window 1.10-1.27x faster than the one of the
/// 8-warp tile it replaced, and 0.91-1.00x the time of the 64-row tile that small grids ran
/// before (log 43), so neither is listed any more. The 64-key form of the D=128 tile, whose
/// blocks cover a 1024-key window's span with 6% fewer scores than 128-key ones, measured no
/// faster at the window (392-393 us against 392, f16, 2,16,8192,128, log 43), and its
/// warp-specialised form, persistent, 1.12-1.14x slower than the 128-key one (log 53). At D=64 both
/// of the table's tiles: the warp-specialised `m128_n128` (from 2048 keys on, and on small
/// grids), whose modified kernel ran 1.09-1.14x faster than the sm80 family's at 4,8,512,64 and
/// 8,16,2048,64 but 7-17% slower at S=512 on large grids (log 48); the warp-specialised
/// `m192_n128` of three consumer warpgroups, the table's from 1025 keys on large grids (log 70);
/// and the 8-warp `m128_n64` of S=512 and 1024 on large grids, whose modified kernel ran
/// 1.4-1.6x slower than its dense one
/// at one block per SM (log 48) and, at the two its launch bounds now ask for
/// ([`KernelSpec::min_blocks_per_sm`]), 1.02-1.15x faster than the sm80 family's modified
/// kernels at 16,16,512,64 (log 50). The host runs the dispatch table's tile where a modified
/// kernel of it exists (at D=64, 96 and 128), else the head dim's first here, else the sm80
/// family's choice.
pub const SM90_MODIFIED_TILES: [TileConfig; 9] = {
    const fn tile(block_n: usize, stages: usize, head_dim: usize) -> TileConfig {
        TileConfig::sm90(128, block_n, 128 / 16, stages, head_dim)
    }
    [
        // Warp-specialised: a producer warpgroup beside the two of the rows, or at D=64 the
        // three of 192.
        TileConfig::sm90(128, 128, 128 / 16 + SM90_PRODUCER_WARPS, 2, 64),
        TileConfig::sm90(192, 128, 192 / 16 + SM90_PRODUCER_WARPS, 2, 64),
        tile(64, 2, 64),
        tile(64, 2, 96),
        TileConfig::sm90(128, 128, 128 / 16 + SM90_PRODUCER_WARPS, 2, 128),
        tile(64, 2, 160),
        tile(64, 2, 192),
        tile(64, 1, 224),
        tile(64, 1, 256),
    ]
};

/// The tiles of the sm90 family's single-modifier kernels ([`Variant::Alibi`],
/// [`Variant::Softcap`]): the sm_90a dispatch table's at the anchors' head dims, D=64 (the
/// warp-specialised `m128_n128` and `m192_n128`, and the 8-warp `m128_n64`) and D=128 (the
/// warp-specialised `m128_n128`), where the issue's targets for ALiBi and the softcap are set (at most 5% slower
/// than the plain kernel of the same tile). Problems of the other head dims, and those with
/// more than one modifier, run the modified kernels.
pub const SM90_ONE_MODIFIER_TILES: [TileConfig; 4] = [
    SM90_MODIFIED_TILES[0],
    SM90_MODIFIED_TILES[1],
    SM90_MODIFIED_TILES[2],
    SM90_MODIFIED_TILES[4],
];

/// The tiles of the sm90 family's [`Variant::Serving`] kernels, at every kernel head dim from
/// 64, so that a variable-length prefill on a device of compute capability 9.0 runs the sm90
/// main loop. Up to D=128 the sm_90a dispatch table's tiles: at D=64 the warp-specialised
/// `m128_n128` (the table's from 2048 keys on small grids) and the three-consumer `m192_n128`
/// (from 1025 keys on large grids), at D=96 the 8-warp `m128_n64`, at D=128 the
/// warp-specialised `m128_n128`. From D=160 two at each head dim: the 8-warp tiles of
/// [`SM90_MODIFIED_TILES`], which pad ([`pads_head_dim`]) and so also run the head dims between
/// (200 on D=224's, 248 on D=256's), and the table's warp-specialised tiles (`m128_n128_w12` at
/// D=160, `m128_n64_w12` from D=192), which run their own head dim only: padded, they spilled
/// (16-128 bytes of stack, their consumers at 232 registers with the padding's arithmetic;
/// BENCHMARKS.md log 87); unpadded, with the copies' destinations as lane offsets
/// (`kernels-gpu`'s `copy_tile_async`), they do not (log 93).
/// They serve the variable-length batches (`flash_attn::plan_varlen_on`)
/// and the KV-cache calls against contiguous caches (`flash_attn::plan_kv_cache_on`) of one
/// split and no score modifier, whose cache lengths they read; [`SM90_PAGED_TILES`]' kernels
/// the paged ones.
/// They copy with `cp.async` ([`sm90_copies_by_tma`]), whose zero-fill past each sequence's
/// rows keeps the next sequence's keys and values out of the tile: a TMA box would read them,
/// and a non-finite value there would reach the output through `P V` (a masked score's 0
/// times it).
pub const SM90_SERVING_TILES: [TileConfig; 12] = {
    const fn warp_specialised(block_n: usize, head_dim: usize) -> TileConfig {
        TileConfig::sm90(128, block_n, 128 / 16 + SM90_PRODUCER_WARPS, 2, head_dim)
    }
    [
        SM90_MODIFIED_TILES[0],
        SM90_MODIFIED_TILES[1],
        TileConfig::sm90(128, 64, 128 / 16, 2, 96),
        SM90_MODIFIED_TILES[4],
        SM90_MODIFIED_TILES[5],
        SM90_MODIFIED_TILES[6],
        SM90_MODIFIED_TILES[7],
        SM90_MODIFIED_TILES[8],
        warp_specialised(128, 160),
        warp_specialised(64, 192),
        warp_specialised(64, 224),
        warp_specialised(64, 256),
    ]
};

/// The tiles of the sm90 family's [`Variant::Paged`] kernels: those of [`SM90_SERVING_TILES`]
/// but D=64's three-consumer `m192_n128`, whose producer read the pages in its 32 registers
/// with 56 bytes of spill (sm_90a) and can have no more beside consumers of 160
/// ([`sm90_producer_registers`]). A paged problem whose dense tile is that one runs the head
/// dim's first, `m128_n128` (which ran chunked prefills of 16 x 256 queries 1.13x faster than
/// `m192_n128` on contiguous caches, BENCHMARKS.md log 88). They read each key block's rows
/// from the pages that the sequence's block table names, checked first, as the sm80 family's
/// paged kernels do.
pub const SM90_PAGED_TILES: [TileConfig; 11] = [
    SM90_SERVING_TILES[0],
    SM90_SERVING_TILES[2],
    SM90_SERVING_TILES[3],
    SM90_SERVING_TILES[4],
    SM90_SERVING_TILES[5],
    SM90_SERVING_TILES[6],
    SM90_SERVING_TILES[7],
    SM90_SERVING_TILES[8],
    SM90_SERVING_TILES[9],
    SM90_SERVING_TILES[10],
    SM90_SERVING_TILES[11],
];

/// Whether the kernel of `variant` on `tile` runs problems of a smaller head dim than its own,
/// padded (see [`crate::padded_head_dim`]): the modified, serving and paged kernels of head
/// dims that pad ([`head_dim_pads`]), but the sm90 family's warp-specialised serving and paged
/// kernels.
/// The host runs a dense problem of a head dim without kernels of its own on a modified kernel,
/// and a serving problem (a KV cache, a paged cache, a variable-length batch) of such a head dim
/// on the serving or paged kernel of the head dim it pads to. The others run their own head dim
/// only, so that they pay nothing for the padding: its arithmetic spilled the serving D=128
/// entries on sm_80, cost the dense anchors up to 3.6%, and spilled the modified D=64 and D=128
/// tiles (BENCHMARKS.md log 31), and the warp-specialised serving tiles from D=160 (16-128
/// bytes, log 87; unpadded they do not spill, log 93), which so serve their own head dim beside
/// the padded 8-warp ones ([`SM90_SERVING_TILES`]), as do the paged ones ([`SM90_PAGED_TILES`],
/// log 94).
pub const fn pads_head_dim(variant: Variant, tile: &TileConfig) -> bool {
    !matches!(variant, Variant::Dense)
        && head_dim_pads(tile.head_dim)
        && !(matches!(variant, Variant::Serving | Variant::Paged) && tile.producer_warps() > 0)
}

/// Whether kernels of `head_dim` may pad ([`pads_head_dim`]): all but those of 64 and 128, the
/// head dims of most models, whose kernels run their own head dim only. A problem of a head dim
/// below 64 or between 64 and 128 so pads to 96 or 160, whatever the variant.
pub const fn head_dim_pads(head_dim: usize) -> bool {
    head_dim != 64 && head_dim != 128
}

/// `a == b` in a `const fn` (where `==` on structs is not).
const fn same_tile(a: &TileConfig, b: &TileConfig) -> bool {
    a.block_m == b.block_m
        && a.block_n == b.block_n
        && a.warps == b.warps
        && a.stages == b.stages
        && a.head_dim == b.head_dim
        && a.layout as u8 == b.layout as u8
        && a.q_source as u8 == b.q_source as u8
}

/// Whether `tile` is one of `family`'s candidate tiles for `variant`: every tile for
/// [`Variant::Dense`], the variant's own entries of [`SERVING_TILES`] for the serving variants
/// ([`SM90_SERVING_TILES`] and [`SM90_PAGED_TILES`] for [`Family::Sm90`]'s [`Variant::Serving`]
/// and [`Variant::Paged`]), [`MODIFIED_TILES`] for
/// [`Variant::Modified`] ([`SM90_MODIFIED_TILES`] for [`Family::Sm90`]).
const fn variant_has_tile(family: Family, variant: Variant, tile: &TileConfig) -> bool {
    const fn listed(tiles: &[TileConfig], tile: &TileConfig) -> bool {
        let mut index = 0;
        while index < tiles.len() {
            if same_tile(&tiles[index], tile) {
                return true;
            }
            index += 1;
        }
        false
    }
    match variant {
        Variant::Dense => true,
        Variant::Modified => match family {
            Family::Sm80 => listed(&MODIFIED_TILES, tile),
            Family::Sm90 => listed(&SM90_MODIFIED_TILES, tile),
        },
        Variant::Alibi | Variant::Softcap => {
            matches!(family, Family::Sm90) && listed(&SM90_ONE_MODIFIER_TILES, tile)
        }
        Variant::Serving if matches!(family, Family::Sm90) => listed(&SM90_SERVING_TILES, tile),
        Variant::Paged if matches!(family, Family::Sm90) => listed(&SM90_PAGED_TILES, tile),
        Variant::Serving | Variant::Paged | Variant::ServingModified | Variant::PagedModified => {
            let mut index = 0;
            while index < SERVING_TILES.len() {
                let (tile_variant, serving_tile) = &SERVING_TILES[index];
                if *tile_variant as u8 == variant as u8 && same_tile(serving_tile, tile) {
                    return true;
                }
                index += 1;
            }
            false
        }
    }
}

/// One forward kernel, named by its axes; each spec that passes the compile-time gates can be
/// compiled into one PTX entry, whose name is the spec's `Display`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelSpec {
    /// The main loop.
    pub family: Family,
    /// The element type of Q, K, V and O.
    pub dtype: Dtype,
    /// The specialisation of the main loop (and the argument struct the entry takes).
    pub variant: Variant,
    /// The tile configuration, head dim included.
    pub tile: TileConfig,
}

/// Whether the kernel of `variant` on `tile` is persistent: its blocks walk the problem's tiles
/// ([`TileConfig::walk_grid`]), its producer copying the next tile's Q and first K under the
/// last tile's tail. The one persistence rule, which the kernel (`kernels-gpu`'s sm90 loop) and
/// the host ([`KernelSpec::is_persistent`]: its grid and shared memory) both ask. The modified
/// kernels of the tiles that can ([`TileConfig::can_persist`]): the 1024-key window at S=8192
/// ran 1.03-1.04x faster, the modified kernels at 8,16,2048,64 non-causal 1.02-1.08x (median
/// 1.04x), at 2,16,4096,128 a median 1.02x, and those of the small grids 1.01-1.02x
/// (BENCHMARKS.md log 53). The dense ones could too, but do not: persistent, they ran
/// 1.03-1.04x faster at 8,16,2048,64 but 1.5-4.5% slower on the small grids of one tile per SM
/// (4,8,512,64 and 4,8,512,128, log 52).
pub const fn persists(variant: Variant, tile: &TileConfig) -> bool {
    matches!(variant, Variant::Modified) && tile.can_persist()
}

/// Registers per thread of the producer warpgroup of the warp-specialised sm90 kernel of
/// `variant` on `tile` after `setmaxnreg` ([`crate::sm90_register_split`] gives the consumers
/// the rest): 24 where it copies by TMA alone; 40 for a persistent kernel's ([`persists`]),
/// which walks the tiles (by TMA in 24 it spilled 24-28 bytes of the walk's values, and 32
/// beside 232 still 4-8; BENCHMARKS.md log 77), and for a serving kernel's, which forms each
/// sequence's `cp.async` addresses (in 24 it spilled 32 bytes, log 85); 80 for a paged
/// kernel's, which also reads the page of each key row: in 40 it spilled 32 bytes at D=64
/// (sm_90a), and in 48 ptxas kept one lookup in flight, each copy from a page shorter than the
/// key block waiting on its row's (mostly an L2 round trip: 5.7% L1 hits, ncu), where in 80 it
/// loads 8 of a tile's 16 ahead of its first copy. On an H200 pages of 16 keys then ran
/// 1.14-1.23x faster at D=128 and 1.09-1.12x at D=64, and pages of 256 (one lookup per key
/// block) 1.02-1.04x slower at D=128, whose consumers keep 208 registers of 224 (BENCHMARKS.md
/// log 90). At D=224 56, so that the consumers keep 224 (beside a producer of 80, D=224's
/// spilled 8 bytes in 208), and at D=256 40, so that they keep 232 (in 224 they spilled 32
/// bytes), its copies a page lookup per row (log 94). Beside three consumers (the 192-row tile)
/// 32 at most: theirs is 160 then, and 152 spilled 52 bytes (log 86). The one rule, which the
/// entries' register split and the kernel's check of it ask.
pub const fn sm90_producer_registers(variant: Variant, tile: &TileConfig) -> u32 {
    let roomy = persists(variant, tile) || variant.is_serving();
    if tile.block_m == 3 * SM90_WARPGROUP_ROWS {
        if roomy {
            32
        } else {
            24
        }
    } else if variant.is_paged() {
        match tile.head_dim {
            256 => 40,
            224 => 56,
            _ => 80,
        }
    } else if roomy {
        40
    } else {
        24
    }
}

/// Whether the sm90 kernel of `variant` on `tile` copies its Q, K and V tiles with TMA
/// (`cp.async.bulk.tensor`, one thread issuing a group's boxes against an `mbarrier`) rather
/// than with `cp.async` from every copying thread: the kernels of every tile, dense, modified
/// or of one modifier, in the overlapped schedule, at head dims of whole 128-byte swizzle
/// blocks ([`TMA_BOX_COLUMNS`]; a padded head dim reads zeros past the problem's columns, as
/// the `cp.async` copies' padding does). The one rule, which the kernel (`kernels-gpu`'s sm90
/// loop) and the host ([`KernelSpec::copies_by_tma`]: the tensor maps it encodes, the shared
/// memory) both ask. In the tiles without a producer warpgroup thread 0 issues them: on an
/// H200 K and V by TMA ran the D=64 8-warp tile 1.07-1.09x faster at 16,16,512,64 and
/// 32,16,512,64 and the D=256 one 1.14-1.17x at 4,16,2048,256, its eight warps no longer
/// computing the copies' addresses, nor waiting for them, fencing them and handing them to the
/// async proxy at every block (BENCHMARKS.md log 74). In the warp-specialised tiles the
/// producer's first thread issues them and its other threads have nothing to do: 1.02-1.05x
/// faster at the anchors, the persistent modified kernels 1.01-1.05x, their producer at 40
/// registers for it ([`crate::sm90_register_split`]; logs 77 and 78).
///
/// ```
/// use flash_attn_params::{sm90_copies_by_tma, TileConfig, Variant};
/// let tile = |block_m, block_n, warps, head_dim| {
///     TileConfig::sm90(block_m, block_n, warps, 2, head_dim)
/// };
/// // The 8-warp tiles of D=64 and D=256 do, with a modifier or without, and the
/// // warp-specialised ones of D=64 and D=128.
/// assert!(sm90_copies_by_tma(Variant::Dense, &tile(128, 64, 8, 64)));
/// assert!(sm90_copies_by_tma(Variant::Alibi, &tile(128, 64, 8, 64)));
/// assert!(sm90_copies_by_tma(Variant::Modified, &tile(128, 64, 8, 256)));
/// assert!(sm90_copies_by_tma(Variant::Dense, &tile(128, 128, 12, 64)));
/// assert!(sm90_copies_by_tma(Variant::Alibi, &tile(128, 128, 12, 128)));
/// assert!(sm90_copies_by_tma(Variant::Modified, &tile(128, 128, 12, 128)));
/// // At D=96 a row is not whole 128-byte swizzle blocks.
/// assert!(!sm90_copies_by_tma(Variant::Dense, &tile(128, 64, 8, 96)));
/// ```
pub const fn sm90_copies_by_tma(variant: Variant, tile: &TileConfig) -> bool {
    !variant.is_serving()
        && sm90_overlaps_blocks(tile.head_dim, tile.stages)
        && tile.head_dim.is_multiple_of(TMA_BOX_COLUMNS)
}

impl KernelSpec {
    /// Whether the kernel is persistent ([`persists`]).
    pub const fn is_persistent(&self) -> bool {
        persists(self.variant, &self.tile)
    }

    /// Whether the kernel takes the Q, K and V tensor maps ([`crate::TENSOR_MAPS_BYTES`]) as its
    /// second parameter: every sm90 kernel (the entry's signature is the family's). Those that
    /// do not copy by TMA ([`Self::copies_by_tma`]) ignore them.
    pub const fn takes_tensor_maps(&self) -> bool {
        matches!(self.family, Family::Sm90)
    }

    /// Whether the kernel copies Q, K and V by TMA ([`sm90_copies_by_tma`]).
    pub const fn copies_by_tma(&self) -> bool {
        matches!(self.family, Family::Sm90) && sm90_copies_by_tma(self.variant, &self.tile)
    }

    /// Dynamic shared memory per block: the tile's ([`TileConfig::smem_bytes`]), and a
    /// persistent kernel's output tile ([`TileConfig::output_tile_offset`]) or the `landed`
    /// barriers of a kernel that copies by TMA ([`Self::copies_by_tma`]), after its K/V ring
    /// where a warp-specialised tile has its pipeline's.
    pub const fn smem_bytes(&self) -> usize {
        if self.is_persistent() {
            self.tile.output_tile_offset() + self.tile.q_tile_bytes()
        } else if self.copies_by_tma() {
            self.tile.pipeline_barrier_offset() + SM90_PIPELINE_BARRIER_BYTES
        } else {
            self.tile.smem_bytes()
        }
    }

    /// Whether the kernel runs problems of a smaller head dim than its own, padded
    /// ([`pads_head_dim`]).
    pub const fn pads_head_dim(&self) -> bool {
        pads_head_dim(self.variant, &self.tile)
    }

    /// Whether the kernel runs problems of head dim `head_dim`: its own, or a smaller one that
    /// it pads ([`Self::pads_head_dim`]).
    pub const fn runs_head_dim(&self, head_dim: usize) -> bool {
        self.tile.head_dim == head_dim || (self.pads_head_dim() && self.tile.head_dim > head_dim)
    }

    /// The query rows whose key blocks the kernel computes as one range (from the first key
    /// that the first row sees to the last that the last row sees): a block's `block_m`, but
    /// in the sm90 family's modified kernels a warpgroup's ([`SM90_WARPGROUP_ROWS`]), each
    /// warpgroup computing the blocks of its own rows.
    ///
    /// ```
    /// use flash_attn_params::{Dtype, Family, KernelSpec, TileConfig, Variant, SM90_MODIFIED_TILES};
    ///
    /// let tile = SM90_MODIFIED_TILES[2];
    /// let spec = |family, variant| KernelSpec { family, dtype: Dtype::F16, variant, tile };
    /// assert_eq!(tile.block_m, 128);
    /// assert_eq!(spec(Family::Sm90, Variant::Modified).key_block_rows(), 64);
    /// assert_eq!(spec(Family::Sm90, Variant::Dense).key_block_rows(), 128);
    /// ```
    pub const fn key_block_rows(&self) -> usize {
        match (self.family, self.variant) {
            (Family::Sm90, Variant::Modified) => SM90_WARPGROUP_ROWS,
            _ => self.tile.block_m,
        }
    }

    /// The blocks per SM that the entry's launch bounds ask ptxas to fit (`.minnctapersm`):
    /// four for the sm80 family's D=32 modified, serving, serving-modified and paged-modified
    /// kernels, two for the sm90 family's 8-warp modified and single-modifier kernels up to head dim 96,
    /// one for every other entry (BENCHMARKS.md log 39 says why not more).
    ///
    /// Why: a modified kernel runs problems in its dense twin's place, and the twins fit more
    /// blocks per SM than the modified kernels did at one. The sm90 twins fit two (121-123
    /// registers), where the modified kernels took 131 (D=64) and 156 (D=96) registers and so
    /// ran one; bounded to two, ptxas fits them in 125 and 120 without a spill (BENCHMARKS.md
    /// log 50). The sm80 D=32 dense kernel fits four (121-126), where the other variants took
    /// 141-157 registers and ran three; bounded to four they take 126-128 without a spill. The
    /// modified kernel then ran 1.10-1.13x faster with every modifier off, 1.08-1.11x with
    /// softcap or ALiBi, and the plain problems of head dims 8 to 24 (which run padded on it)
    /// 1.02-1.10x faster (log 51). The paged kernel (130 registers, three blocks) spills 8 bytes
    /// when bounded to four, so it is left at one; so are the paged kernels of D=64 and D=96,
    /// which fit three blocks but ran paged decode up to 1.08x slower there (log 51).
    /// `tests/cpu/ptxas.rs` checks on the ptxas gate that these kernels fit as many blocks per
    /// SM as their dense twins.
    ///
    /// ```
    /// use flash_attn_params::{Dtype, Family, KernelSpec, Variant, SM90_MODIFIED_TILES};
    ///
    /// let spec = |tile, variant| KernelSpec { family: Family::Sm90, dtype: Dtype::F16, variant, tile };
    /// let eight_warps_d96 = SM90_MODIFIED_TILES[3];
    /// assert_eq!((eight_warps_d96.warps, eight_warps_d96.head_dim), (8, 96));
    /// assert_eq!(spec(eight_warps_d96, Variant::Modified).min_blocks_per_sm(), 2);
    /// assert_eq!(spec(eight_warps_d96, Variant::Dense).min_blocks_per_sm(), 1);
    /// ```
    pub const fn min_blocks_per_sm(&self) -> usize {
        match (self.family, self.variant) {
            (
                Family::Sm80,
                Variant::Modified
                | Variant::Serving
                | Variant::ServingModified
                | Variant::PagedModified,
            ) if self.tile.head_dim == 32 => 4,
            (Family::Sm90, Variant::Modified | Variant::Alibi | Variant::Softcap)
                if self.tile.producer_warps() == 0 && self.tile.head_dim <= 96 =>
            {
                2
            }
            _ => 1,
        }
    }
}

/// The PTX entry name, which spells the spec out:
/// `flash_fwd_{f16|bf16}_d{head_dim}_m{block_m}_n{block_n}_w{warps}_s{stages}`, then `_pad` for
/// [`SmemLayout::Padded`] and `_qsmem` for [`QSource::SharedMemory`]. [`Family::Sm80`] and
/// [`Variant::Dense`] add nothing: the names predate those axes, and the data files (the
/// dispatch table, the fallbacks, the ptxas gate) name kernels by them. Another family or
/// variant appends a suffix of its own (`_serving`, `_paged`, `_mod`; the family's last:
/// [`Family::name_suffix`], `_sm90a`), leaving these names as they are; a family whose tiles fix
/// the layout and the Q source leaves out `_pad` and `_qsmem`
/// (`flash_fwd_f16_d128_m128_n128_w8_s2_sm90a`). Allocation-free, so that the no_std side can
/// use it too.
impl fmt::Display for KernelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let KernelSpec {
            family,
            dtype,
            variant,
            tile,
        } = self;
        write!(
            f,
            "flash_fwd_{}_d{}_m{}_n{}_w{}_s{}",
            dtype.name(),
            tile.head_dim,
            tile.block_m,
            tile.block_n,
            tile.warps,
            tile.stages
        )?;
        if !family.fixes_layout_and_q_source() {
            if tile.layout == SmemLayout::Padded {
                f.write_str("_pad")?;
            }
            if tile.q_source == QSource::SharedMemory {
                f.write_str("_qsmem")?;
            }
        }
        // Exhaustive on purpose: a new variant fails to compile here until it has its suffix.
        match variant {
            Variant::Dense => {}
            Variant::Serving => f.write_str("_serving")?,
            Variant::Paged => f.write_str("_paged")?,
            Variant::Modified => f.write_str("_mod")?,
            Variant::ServingModified => f.write_str("_serving_mod")?,
            Variant::PagedModified => f.write_str("_paged_mod")?,
            Variant::Alibi => f.write_str("_alibi")?,
            Variant::Softcap => f.write_str("_softcap")?,
        }
        f.write_str(family.name_suffix())
    }
}

/// The candidate values of the axes besides the tile's (`tile.rs` has those). Every combination
/// is a candidate spec (a variant only with its own tiles: [`SERVING_TILES`]' for
/// [`Variant::Serving`] and [`Variant::Paged`], which need not be in the dense grid, and
/// [`MODIFIED_TILES`] for [`Variant::Modified`]; a family only with the variants it has,
/// [`Family::has_variant`], and its own tiles); each one that passes [`TileConfig::check_for`]
/// can become one PTX entry (see [`for_each_gated_config`]).
pub const CANDIDATE_FAMILIES: [Family; 2] = [Family::Sm80, Family::Sm90];
/// The candidate element types (see [`CANDIDATE_FAMILIES`]).
pub const CANDIDATE_DTYPES: [Dtype; 2] = [Dtype::F16, Dtype::Bf16];
/// The candidate variants (see [`CANDIDATE_FAMILIES`]).
pub const CANDIDATE_VARIANTS: [Variant; 8] = [
    Variant::Dense,
    Variant::Serving,
    Variant::Paged,
    Variant::Modified,
    Variant::ServingModified,
    Variant::PagedModified,
    Variant::Alibi,
    Variant::Softcap,
];

/// Calls `visit(candidate, verdict)` for every candidate spec, in the order of the PTX entries:
/// family, element type, variant, then the tile's (head dim, `block_m`, `block_n`, warps,
/// stages, layout, Q source). `candidate` holds the axes, its tile checked or not; `verdict` is
/// [`TileConfig::check_for`]'s: `Ok` with the same spec, or the first limit its tile violates.
pub fn for_each_candidate(mut visit: impl FnMut(KernelSpec, Result<KernelSpec, &'static str>)) {
    for family in CANDIDATE_FAMILIES {
        for dtype in CANDIDATE_DTYPES {
            for variant in CANDIDATE_VARIANTS {
                if !family.has_variant(variant) {
                    continue;
                }
                let spec = |tile| KernelSpec {
                    family,
                    dtype,
                    variant,
                    tile,
                };
                if variant.is_serving() && matches!(family, Family::Sm80) {
                    // Their own tiles, outside the dense grid (16-key blocks), each checked
                    // when the list was built.
                    for (tile_variant, tile) in SERVING_TILES {
                        if tile_variant == variant {
                            visit(spec(tile), Ok(spec(tile)));
                        }
                    }
                    continue;
                }
                for_each_tile_candidate(family, |tile, verdict| {
                    if variant_has_tile(family, variant, &tile) {
                        visit(spec(tile), verdict.map(spec));
                    }
                });
            }
        }
    }
}

/// Calls `visit(spec)` for every candidate that passes the compile-time gates, in entry order:
/// the search space, the specs `FLASH_ATTN_KERNELS=all` compiles into PTX entries.
pub fn for_each_gated_config(mut visit: impl FnMut(KernelSpec)) {
    for_each_candidate(|_, verdict| {
        if let Ok(spec) = verdict {
            visit(spec);
        }
    });
}

/// A spec's axes as the generated lists write them (enums by variant name):
/// `Family, Dtype, Variant, block_m, block_n, warps, stages, head_dim, Layout, QSource`. The
/// arguments of [`crate::built_spec!`] and of the GPU crate's `forward_entries!`.
#[derive(Clone, Copy, Debug)]
pub struct SpecArgs(pub KernelSpec);

impl fmt::Display for SpecArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let SpecArgs(KernelSpec {
            family,
            dtype,
            variant,
            tile,
        }) = self;
        write!(
            f,
            "{family:?}, {dtype:?}, {variant:?}, {}, {}, {}, {}, {}, {:?}, {:?}",
            tile.block_m,
            tile.block_n,
            tile.warps,
            tile.stages,
            tile.head_dim,
            tile.layout,
            tile.q_source
        )
    }
}

/// Which specs a build compiles into PTX entries, chosen at build time by the environment
/// variable [`KERNELS_ENV`] (watched by the build scripts): the build's choice is
/// [`crate::KERNEL_SET`], its specs [`crate::BUILT_CONFIGS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelSet {
    /// The default (`FLASH_ATTN_KERNELS` unset, or `shipping`): the kernels the default API
    /// runs, those the dispatch table (`host/dispatch-table.tsv`) and the fallbacks
    /// (`host/fallback-kernels.txt`) name.
    Shipping,
    /// `FLASH_ATTN_KERNELS=all`: the search space, every spec that passes the compile-time
    /// gates ([`for_each_gated_config`]); what the tuner and the full GPU verification need.
    All,
}

/// The build-time switch between the [`KernelSet`]s: unset or `shipping`, or `all`.
pub const KERNELS_ENV: &str = "FLASH_ATTN_KERNELS";
