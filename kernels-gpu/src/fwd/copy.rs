//! The copies that every main loop issues: a tile of rows from global to shared memory with
//! `cp.async`, in whatever layout the tile type has (from a contiguous tensor or a paged cache),
//! and the wait for them.

use flash_attn_params::{CopyPlan, CHUNK_BYTES, CHUNK_ELEMS, MIN_PAGE_SIZE};

use crate::attn::block_info::{PagedRows, RowBlock};
use crate::ptx::{cp_async_cg_16, cp_async_cg_16_zfill, cp_async_wait_group, opaque_to_optimizer};
use crate::smem::SharedTile;

/// Issues this thread's share of the 16-byte copies of a `[ROWS, HEAD_DIM]` tile, as
/// [`CopyPlan`] splits them.
///
/// Where the problem's head dim is smaller than the kernel's (`source.chunks <
/// Tile::ROW_CHUNKS`: only with `PADS`, in the kernels of [`pads_head_dim`]), the
/// columns past it are padding: with `ZERO_PADDING` (the Q tile) they are zero-filled, so that
/// every score sums only the problem's columns; without (K and V) they repeat the row's last
/// chunk, which costs no predicate in the main loop's copies. Both are exact: a score is
/// `q · k` over the columns, and Q's padding is 0 (times a finite K element), and V's padding
/// only reaches output columns that are never stored. Without `PADS` the padding compiles out:
/// the dense kernels, and every kernel of head dims 64 and 128, run whole rows, which keeps
/// their registers and time (the padding's arithmetic spilled the serving D=128 entries on
/// sm_80 and cost the dense anchors up to 3.6%, BENCHMARKS.md log 31).
///
/// [`pads_head_dim`]: flash_attn_params::pads_head_dim
///
/// # Safety
/// `source.base` plus `row * row_stride` is a 16-byte-aligned row of `8 * source.chunks`
/// readable elements for every `row < source.rows`, `source.rows >= 1` and
/// `1 <= source.chunks <= Tile::ROW_CHUNKS` (`source.chunks == Tile::ROW_CHUNKS` without
/// `PADS`); every thread of the block calls it with its own `thread`.
#[inline(always)]
pub unsafe fn copy_tile_async<
    Tile: SharedTile,
    const ROWS: usize,
    const WARPS: usize,
    const PADS: bool,
    const ZERO_PADDING: bool,
>(
    tile: Tile,
    source: RowBlock,
    thread: usize,
) {
    let plan = const { CopyPlan::of_tile(ROWS, 32 * WARPS, Tile::ROW_CHUNKS) };
    // Each thread copies the same chunk of each group of rows `first + pass * rows_per_pass`.
    let (first, chunk) = (thread / plan.group_chunks, thread % plan.group_chunks);
    // The chunk a copy into `column` reads: itself, or past the problem's head dim its last.
    let chunks = if PADS {
        source.chunks
    } else {
        Tile::ROW_CHUNKS as u32
    };
    let read_column = |column: usize| {
        if PADS {
            (column as u32).min(chunks - 1) as usize
        } else {
            column
        }
    };
    let whole_rows = !ZERO_PADDING || chunks == Tile::ROW_CHUNKS as u32;
    if source.first_row + ROWS as u32 <= source.rows && whole_rows {
        // One pointer walks this thread's rows. The step goes through `opaque_to_optimizer` so
        // that LLVM keeps one pointer instead of a 64-bit induction variable per copy (which
        // cost 16 registers and 16 instructions per key block).
        let step = opaque_to_optimizer(plan.rows_per_pass * source.row_stride);
        let mut row_pointer = source.base.add(
            (source.first_row + first as u32) as usize * source.row_stride
                + read_column(chunk) * CHUNK_ELEMS,
        );
        for pass in 0..plan.passes {
            for group in 0..plan.groups {
                let column = group * plan.group_chunks + chunk;
                let destination = tile.chunk_address(first + pass * plan.rows_per_pass, column);
                // Group 0 is the pointer's own column (and without `PADS` group `g` lies
                // `g * group_chunks` chunks on).
                let offset = (read_column(column) - read_column(chunk)) * CHUNK_ELEMS;
                cp_async_cg_16(destination, row_pointer.wrapping_add(offset).cast());
            }
            row_pointer = row_pointer.wrapping_add(step);
        }
    } else {
        for pass in 0..plan.passes {
            let row = first + pass * plan.rows_per_pass;
            let source_row = source.first_row + row as u32;
            for group in 0..plan.groups {
                let column = group * plan.group_chunks + chunk;
                // A missing row (or with `ZERO_PADDING` a padding column) reads nothing (0
                // source bytes) but still names a valid address.
                let exists =
                    source_row < source.rows && (!ZERO_PADDING || (column as u32) < chunks);
                let source_bytes = if exists { CHUNK_BYTES as u32 } else { 0 };
                let read_row = source_row.min(source.rows - 1);
                let element =
                    read_row as usize * source.row_stride + read_column(column) * CHUNK_ELEMS;
                let destination = tile.chunk_address(row, column);
                cp_async_cg_16_zfill(destination, source.base.add(element).cast(), source_bytes);
            }
        }
    }
}

/// This thread's copies of a paged key tile `$tile` (of type `$Tile`, `$rows` rows, `$warps`
/// warps copying, `$pads` as [`copy_paged_tile_async`]'s) from `$source`, in every pass,
/// `$row_start` the element offset of the row `$read_row` that it reads in pass `$pass` (the
/// last key's for a missing row, which reads nothing, 0 source bytes, but still names a valid
/// address in a page that was checked). A macro, not a function taking a closure: the closure
/// moved LLVM's address arithmetic in the kernels of the per-row path (the sm80 D=224 and
/// D=256 ones sit at 255 registers).
macro_rules! copy_paged_passes {
    (
        $Tile:ty, $rows:expr, $warps:expr, $pads:expr, $tile:expr, $source:expr, $thread:expr,
        |$pass:pat_param, $read_row:ident| $row_start:expr
    ) => {
        let plan = const { CopyPlan::of_tile($rows, 32 * $warps, <$Tile>::ROW_CHUNKS) };
        let (first, chunk) = ($thread / plan.group_chunks, $thread % plan.group_chunks);
        // The chunk a copy into `column` reads: itself, or past the problem's head dim its last.
        let read_column = |column: usize| {
            if $pads {
                (column as u32).min($source.chunks - 1) as usize
            } else {
                column
            }
        };
        for pass in 0..plan.passes {
            let row = first + pass * plan.rows_per_pass;
            let source_row = $source.first_row + row as u32;
            let source_bytes = if source_row < $source.rows {
                CHUNK_BYTES as u32
            } else {
                0
            };
            for group in 0..plan.groups {
                let column = group * plan.group_chunks + chunk;
                let $pass = pass;
                let $read_row = source_row.min($source.rows - 1);
                let element = $row_start + read_column(column) * CHUNK_ELEMS;
                let destination = $tile.chunk_address(row, column);
                cp_async_cg_16_zfill(
                    destination,
                    $source.head_base.add(element).cast(),
                    source_bytes,
                );
            }
        }
    };
}

/// [`copy_tile_async`] for a K or V tile of a paged cache: each copy finds its row's page. With
/// `PADS` (the paged kernels of [`pads_head_dim`]) the columns past the problem's head dim
/// repeat the row's last chunk, as [`copy_tile_async`]'s K and V padding does.
///
/// [`pads_head_dim`]: flash_attn_params::pads_head_dim
///
/// # Safety
/// Every row below `source.rows` lies in a page of the cache (the block checked them), its
/// first `8 * source.chunks` elements 16-byte aligned and readable, `source.rows >= 1` and
/// `1 <= source.chunks <= Tile::ROW_CHUNKS` (`source.chunks == Tile::ROW_CHUNKS` without
/// `PADS`), `source.first_row` a multiple of `ROWS`; every thread of the block calls it with
/// its own `thread`.
#[inline(always)]
pub unsafe fn copy_paged_tile_async<
    Tile: SharedTile,
    const ROWS: usize,
    const WARPS: usize,
    const PADS: bool,
>(
    tile: Tile,
    source: PagedRows,
    thread: usize,
) {
    if tile_in_one_page::<Tile, ROWS>(&source) {
        let first_read = source.first_row.min(source.rows - 1);
        let tile_start = source.row_offset(first_read);
        copy_paged_passes!(
            Tile,
            ROWS,
            WARPS,
            PADS,
            tile,
            source,
            thread,
            |_, read_row| { tile_start + (read_row - first_read) as usize * source.row_stride }
        );
    } else {
        copy_paged_passes!(
            Tile,
            ROWS,
            WARPS,
            PADS,
            tile,
            source,
            thread,
            |_, read_row| { source.row_offset(read_row) }
        );
    }
}

/// The most page lookups one thread makes for a key tile ([`TilePages`]): one per
/// [`MIN_PAGE_SIZE`] rows of a tile of up to 256.
const MAX_TILE_LOOKUPS: usize = 256 / MIN_PAGE_SIZE;

/// The pages of the rows that one copying thread reads of one key tile of a paged cache, looked
/// up ([`TilePages::look_up`]) before the copies that read them
/// ([`copy_looked_up_tile_async`]): a warp-specialised producer looks up the next key block's
/// pages before it waits for the ring slot of this one, so that its copies never wait on a
/// lookup, and a V tile takes the pages its K tile used. One lookup per [`MIN_PAGE_SIZE`] rows
/// of the tile: the rows a thread copies in the passes of one such run lie in one page; or one
/// for the tile where it lies within one page.
#[derive(Clone, Copy)]
pub struct TilePages {
    /// Entry `e`: the page of this thread's rows in passes `e * passes_per_lookup ..`; entry 0
    /// alone where the tile lies within one page.
    pages: [u32; MAX_TILE_LOOKUPS],
}

/// How [`TilePages`] covers a tile's passes: consecutive passes of one lookup, and lookups.
struct LookupPlan {
    passes_per_lookup: usize,
    lookups: usize,
}

impl LookupPlan {
    /// The plan of a tile that [`CopyPlan::of_tile`] splits into `plan`.
    const fn of(plan: CopyPlan) -> LookupPlan {
        let passes_per_lookup = if plan.rows_per_pass < MIN_PAGE_SIZE {
            MIN_PAGE_SIZE / plan.rows_per_pass
        } else {
            1
        };
        let lookups = plan.passes.div_ceil(passes_per_lookup);
        assert!(
            lookups <= MAX_TILE_LOOKUPS,
            "a key tile takes at most MAX_TILE_LOOKUPS page lookups"
        );
        LookupPlan {
            passes_per_lookup,
            lookups,
        }
    }
}

impl TilePages {
    /// No pages: a value for a loop's first turn, which copies none.
    pub const NONE: TilePages = TilePages {
        pages: [0; MAX_TILE_LOOKUPS],
    };

    /// Looks up the pages of the rows of `source` that thread `thread` copies with
    /// [`copy_looked_up_tile_async`] (the same `Tile`, `ROWS` and `WARPS`); a K and a V tile of
    /// the same key block share them.
    ///
    /// # Safety
    /// As for [`copy_paged_tile_async`].
    #[inline(always)]
    pub unsafe fn look_up<Tile: SharedTile, const ROWS: usize, const WARPS: usize>(
        source: &PagedRows,
        thread: usize,
    ) -> TilePages {
        let plan = const { CopyPlan::of_tile(ROWS, 32 * WARPS, Tile::ROW_CHUNKS) };
        let lookup =
            const { LookupPlan::of(CopyPlan::of_tile(ROWS, 32 * WARPS, Tile::ROW_CHUNKS)) };
        let mut pages = TilePages::NONE;
        if tile_in_one_page::<Tile, ROWS>(source) {
            pages.pages[0] = source.page_of(source.first_row.min(source.rows - 1));
        } else {
            let first = thread / plan.group_chunks;
            for entry in 0..lookup.lookups {
                // The entry's first row (clamped, as the copies clamp): the others of its
                // passes lie in the same run of `MIN_PAGE_SIZE` rows, so in the same page.
                let row = first + entry * lookup.passes_per_lookup * plan.rows_per_pass;
                let read_row = (source.first_row + row as u32).min(source.rows - 1);
                pages.pages[entry] = source.page_of(read_row);
            }
        }
        pages
    }
}

/// [`copy_paged_tile_async`] with the tile's pages looked up already ([`TilePages::look_up`]).
///
/// # Safety
/// As for [`copy_paged_tile_async`]; `pages` is what [`TilePages::look_up`] returned for this
/// thread and a `source` of the same `pages`, `page_shift`, `first_row` and `rows`.
#[inline(always)]
pub unsafe fn copy_looked_up_tile_async<
    Tile: SharedTile,
    const ROWS: usize,
    const WARPS: usize,
    const PADS: bool,
>(
    tile: Tile,
    source: PagedRows,
    pages: TilePages,
    thread: usize,
) {
    let lookup = const { LookupPlan::of(CopyPlan::of_tile(ROWS, 32 * WARPS, Tile::ROW_CHUNKS)) };
    if tile_in_one_page::<Tile, ROWS>(&source) {
        let first_read = source.first_row.min(source.rows - 1);
        let tile_start = source.row_offset_in(pages.pages[0], first_read);
        copy_paged_passes!(
            Tile,
            ROWS,
            WARPS,
            PADS,
            tile,
            source,
            thread,
            |_, read_row| { tile_start + (read_row - first_read) as usize * source.row_stride }
        );
    } else {
        copy_paged_passes!(
            Tile,
            ROWS,
            WARPS,
            PADS,
            tile,
            source,
            thread,
            |pass, read_row| {
                source.row_offset_in(pages.pages[pass / lookup.passes_per_lookup], read_row)
            }
        );
    }
}

/// Whether the rows of a `ROWS`-row key tile lie within one page, which then takes one lookup
/// and places its rows a stride apart: pages at least as long as the tile (which starts at a
/// multiple of its rows). A lookup per row cost the paged B=1 decode 1.9x the contiguous
/// kernel's instructions (ncu). Up to head dim 128 only: above it the register file is full,
/// and the second path spilled (D=224 and D=256, 4-8 bytes on sm_80 and sm_89).
#[inline(always)]
fn tile_in_one_page<Tile: SharedTile, const ROWS: usize>(source: &PagedRows) -> bool {
    let per_tile_lookup = const {
        assert!(
            ROWS.is_power_of_two(),
            "a key tile's rows are a power of two"
        );
        Tile::ROW_CHUNKS <= 16
    };
    per_tile_lookup && ROWS.trailing_zeros() <= source.page_shift
}

/// `cp.async.wait_group` with a count computed from `STAGES` (a const argument cannot be): waits
/// until at most `pending` of this thread's committed groups are in flight (`pending <= 3`).
///
/// # Safety
/// As for [`cp_async_wait_group`]: it orders only this thread's copies, and a barrier must
/// follow before other threads read them.
#[inline(always)]
pub unsafe fn cp_async_wait_at_most(pending: usize) {
    match pending {
        0 => cp_async_wait_group::<0>(),
        1 => cp_async_wait_group::<1>(),
        2 => cp_async_wait_group::<2>(),
        _ => cp_async_wait_group::<3>(),
    }
}
