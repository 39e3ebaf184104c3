//! The copies that every main loop issues: a tile of rows from global to shared memory with
//! `cp.async`, in whatever layout the tile type has (from a contiguous tensor or a paged cache),
//! and the wait for them.

use core::ops::Range;

use flash_attn_params::{CopyPlan, CHUNK_BYTES, CHUNK_ELEMS, MIN_PAGE_SIZE};

use crate::attn::block_info::{PagedRows, RowBlock};
use crate::ptx::{cp_async_cg_16, cp_async_cg_16_zfill, cp_async_wait_group, opaque_to_optimizer};
use crate::smem::{SharedTile, ROW_GROUP_ROWS};

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
    // A constant of the MIR, so that the copies of more rows a pass compile as they did before
    // [`periodic_destination`] existed (as a branch on `plan`, LLVM got both forms and 138
    // kernels' PTX moved, in instruction order and block layout).
    let periodic = const {
        CopyPlan::of_tile(ROWS, 32 * WARPS, Tile::ROW_CHUNKS).rows_per_pass < ROW_GROUP_ROWS
    };
    // Each thread copies the same chunk of each group of rows `first + pass * rows_per_pass`.
    let (first, chunk) = (thread / plan.group_chunks, thread % plan.group_chunks);
    let chunks = if PADS {
        source.chunks
    } else {
        Tile::ROW_CHUNKS as u32
    };
    let whole_rows = !ZERO_PADDING || chunks == Tile::ROW_CHUNKS as u32;
    if source.first_row + ROWS as u32 <= source.rows && whole_rows {
        // One pointer walks this thread's rows. The step goes through `opaque_to_optimizer` so
        // that LLVM keeps one pointer instead of a 64-bit induction variable per copy (which
        // cost 16 registers and 16 instructions per key block).
        let step = opaque_to_optimizer(plan.rows_per_pass * source.row_stride);
        let mut row_pointer = source.base.add(
            (source.first_row + first as u32) as usize * source.row_stride
                + read_column::<PADS>(chunk, chunks) * CHUNK_ELEMS,
        );
        for pass in 0..plan.passes {
            for group in 0..plan.groups {
                let column = group * plan.group_chunks + chunk;
                let destination = if periodic {
                    periodic_destination(tile, &plan, first, chunk, pass, group)
                } else {
                    tile.chunk_address(first + pass * plan.rows_per_pass, column)
                };
                // Group 0 is the pointer's own column (and without `PADS` group `g` lies
                // `g * group_chunks` chunks on).
                let offset = (read_column::<PADS>(column, chunks)
                    - read_column::<PADS>(chunk, chunks))
                    * CHUNK_ELEMS;
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
                let element = read_row as usize * source.row_stride
                    + read_column::<PADS>(column, chunks) * CHUNK_ELEMS;
                let destination = if periodic {
                    periodic_destination(tile, &plan, first, chunk, pass, group)
                } else {
                    tile.chunk_address(row, column)
                };
                cp_async_cg_16_zfill(destination, source.base.add(element).cast(), source_bytes);
            }
        }
    }
}

/// The chunk that a copy into chunk `column` of a row reads: `column` itself, or with `PADS`
/// past the problem's `chunks` (its head dim over 8) the row's last.
#[inline(always)]
fn read_column<const PADS: bool>(column: usize, chunks: u32) -> usize {
    if PADS {
        (column as u32).min(chunks - 1) as usize
    } else {
        column
    }
}

/// The shared address that `pass`, `group` of [`copy_tile_async`] writes (chunk `group *
/// group_chunks + chunk` of row `first + pass * rows_per_pass`) where a pass copies fewer rows
/// than a row group of the swizzle ([`ROW_GROUP_ROWS`]; D=256's 32 chunks a row over 128
/// threads: 4 rows): the passes' swizzles repeat every `ROW_GROUP_ROWS / rows_per_pass` passes,
/// so the addresses are that many lane offsets plus constants
/// ([`SharedTile::fragment_address`]). Formed whole from the row, each pass's address was a
/// register of its own that LLVM hoisted out of the key loop: 16 for a K tile and 32 for a Q
/// tile in the D=256 sm90 serving producer, which spilled within its 40 registers
/// (BENCHMARKS.md log 93). The copies of more rows a pass keep the whole form, whose
/// addresses LLVM already forms as one register plus constants.
#[inline(always)]
fn periodic_destination<Tile: SharedTile>(
    tile: Tile,
    plan: &CopyPlan,
    first: usize,
    chunk: usize,
    pass: usize,
    group: usize,
) -> u32 {
    let period = ROW_GROUP_ROWS / plan.rows_per_pass;
    let lane = Tile::lane_chunk(first + pass % period * plan.rows_per_pass, chunk);
    tile.fragment_address(lane, pass / period, group * plan.group_chunks)
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
    let plan = const { CopyPlan::of_tile(ROWS, 32 * WARPS, Tile::ROW_CHUNKS) };
    // As in `copy_tile_async`: the D=256 sm90 paged producer spilled 64 bytes of its 40
    // registers with each pass's address whole, none with them periodic (BENCHMARKS.md log 94).
    let periodic = const {
        CopyPlan::of_tile(ROWS, 32 * WARPS, Tile::ROW_CHUNKS).rows_per_pass < ROW_GROUP_ROWS
    };
    let (first, chunk) = (thread / plan.group_chunks, thread % plan.group_chunks);
    // A tile within one page (pages at least as long as the tile, which starts at a multiple
    // of its rows) takes one page lookup, its rows a stride apart: a lookup per row cost the
    // paged B=1 decode 1.9x the contiguous kernel's instructions (ncu). Up to head dim 128
    // only: above it the register file is full, and the second path spilled (D=224 and D=256,
    // 4-8 bytes on sm_80 and sm_89).
    let per_tile_lookup = const {
        assert!(
            ROWS.is_power_of_two(),
            "a key tile's rows are a power of two"
        );
        Tile::ROW_CHUNKS <= 16
    };
    // The copies of every pass, `row_start` the element offset of a row (the last key's for a
    // missing row, which reads nothing, 0 source bytes, but still names a valid address in a
    // page that was checked). A macro, so that the per-row path's code is what it was before
    // the per-tile one (its D=224 and D=256 kernels sit at 255 registers).
    macro_rules! copy_passes {
        (|$read_row:ident| $row_start:expr) => {
            for pass in 0..plan.passes {
                let row = first + pass * plan.rows_per_pass;
                let source_row = source.first_row + row as u32;
                let source_bytes = if source_row < source.rows {
                    CHUNK_BYTES as u32
                } else {
                    0
                };
                for group in 0..plan.groups {
                    let column = group * plan.group_chunks + chunk;
                    let $read_row = source_row.min(source.rows - 1);
                    let element =
                        $row_start + read_column::<PADS>(column, source.chunks) * CHUNK_ELEMS;
                    let destination = if periodic {
                        periodic_destination(tile, &plan, first, chunk, pass, group)
                    } else {
                        tile.chunk_address(row, column)
                    };
                    cp_async_cg_16_zfill(
                        destination,
                        source.head_base.add(element).cast(),
                        source_bytes,
                    );
                }
            }
        };
    }
    if per_tile_lookup && ROWS.trailing_zeros() <= source.page_shift {
        // The tile's first row that exists (a tile past the last key reads the last key's row).
        let first_read = source.first_row.min(source.rows - 1);
        let tile_start = source.row_offset(first_read);
        copy_passes!(|read_row| tile_start + (read_row - first_read) as usize * source.row_stride);
    } else {
        copy_passes!(|read_row| source.row_offset(read_row));
    }
}

/// [`copy_paged_tile_async`] for the sm90 family's kernels: where every row of the tile exists
/// (all its tiles but a sequence's last), no copy carries a predicate or a page lookup of its
/// own, and the copies walk the rows with one pointer, as [`copy_tile_async`] walks a
/// contiguous tensor's. A tile within one page (pages at least as long as the tile, which
/// starts at a multiple of its rows) takes one lookup; a tile over several pages one per run
/// of [`MIN_PAGE_SIZE`] rows: the rows a thread copies in `MIN_PAGE_SIZE / rows_per_pass`
/// consecutive passes lie in one such run (its first row is below `rows_per_pass`), so in one
/// page. The other tiles take [`copy_paged_tile_async`]'s copies, and so do the head dims above
/// 128 where every warp of the block copies (`WARPS == BLOCK_WARPS`: the 8-warp tiles, whose
/// threads also hold the MMAs' fragments); a producer warpgroup, which holds nothing else, walks
/// at D=192 too (D=160 and D=224 copy 32 rows a pass, more than a run, and D=256's walk spilled
/// its producer; BENCHMARKS.md log 94). On an H200 the D=128 kernel ran 1.06-1.15x faster over
/// pages of 16 keys and 1.13-1.17x over pages of 256 (0.84-1.03x the contiguous cache's time in
/// the timing tool, 1.01-1.13x in criterion's benchmark, a difference not yet explained), the
/// D=64 one 1.02-1.07x faster over pages of 256 and within 2% over pages of 16 (BENCHMARKS.md
/// log 92).
///
/// The sm80 family's paged kernels keep [`copy_paged_tile_async`]: with the runs their
/// registers rose by 14 to 54 (to 254 at D=128) and the D=32 modified one spilled 12 bytes
/// (ptxas 12.9), where the sm90 kernels' producer holds its 80.
///
/// # Safety
/// As for [`copy_paged_tile_async`].
#[inline(always)]
pub unsafe fn copy_paged_tile_walking_async<
    Tile: SharedTile,
    const ROWS: usize,
    const WARPS: usize,
    const BLOCK_WARPS: usize,
    const PADS: bool,
>(
    tile: Tile,
    source: PagedRows,
    thread: usize,
) {
    let plan = const { CopyPlan::of_tile(ROWS, 32 * WARPS, Tile::ROW_CHUNKS) };
    // The runs need a pass's rows within one run and whole runs in the tile. Above head dim
    // 128 the register file of a thread that also computes is full, and
    // `copy_paged_tile_async`'s per-row path alone fits; a producer's walk fits below 256 (at
    // D=256 its run pointers spilled 76 bytes of the producer's 40 registers, the per-row path
    // none; BENCHMARKS.md log 94).
    let walks = const {
        let plan = CopyPlan::of_tile(ROWS, 32 * WARPS, Tile::ROW_CHUNKS);
        let head_dim = Tile::ROW_CHUNKS * CHUNK_ELEMS;
        (head_dim <= 128 || (WARPS < BLOCK_WARPS && head_dim < 256))
            && plan.rows_per_pass <= MIN_PAGE_SIZE
            && ROWS.is_multiple_of(MIN_PAGE_SIZE)
    };
    if !walks || source.first_row + ROWS as u32 > source.rows {
        copy_paged_tile_async::<Tile, ROWS, WARPS, PADS>(tile, source, thread);
    } else {
        let (first, chunk) = (thread / plan.group_chunks, thread % plan.group_chunks);
        // `copy_tile_async`'s walk: sharing its code moved the SASS of 75 kernels without a
        // paged cache (ptxas 12.9), which this function leaves as they were.
        let run_passes = MIN_PAGE_SIZE / plan.rows_per_pass;
        let step = opaque_to_optimizer(plan.rows_per_pass * source.row_stride);
        // Within one page the pointer walks the whole tile from one lookup; beside the runs,
        // that path as `copy_tile_async` (with its own path for missing rows) spilled the
        // D=128 producer (100 bytes at 80 registers), this one does not.
        let in_one_page = ROWS.trailing_zeros() <= source.page_shift;
        let run_start = |run: usize| {
            let row = (first + run * MIN_PAGE_SIZE) as u32;
            source.head_base.add(
                source.row_offset(source.first_row + row)
                    + read_column::<PADS>(chunk, source.chunks) * CHUNK_ELEMS,
            )
        };
        let copy_passes = |passes: Range<usize>, mut row_pointer: *const u16| {
            for pass in passes {
                for group in 0..plan.groups {
                    let column = group * plan.group_chunks + chunk;
                    let destination = tile.chunk_address(first + pass * plan.rows_per_pass, column);
                    let offset = (read_column::<PADS>(column, source.chunks)
                        - read_column::<PADS>(chunk, source.chunks))
                        * CHUNK_ELEMS;
                    cp_async_cg_16(destination, row_pointer.wrapping_add(offset).cast());
                }
                row_pointer = row_pointer.wrapping_add(step);
            }
        };
        if in_one_page {
            copy_passes(0..plan.passes, run_start(0));
        } else {
            for run in 0..plan.passes / run_passes {
                copy_passes(run * run_passes..(run + 1) * run_passes, run_start(run));
            }
        }
    }
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
