//! Which keys each query row sees: the visibility rule, written once for the kernels, the CPU
//! reference and the tests.
//!
//! Positions are aligned to the bottom right, as in FlashAttention: query `i` sits on the
//! diagonal key `i + seq_len_kv - seq_len_q` (the last query on the last key). A sliding window
//! `(left, right)` lets query `i` see key `j` iff `j` is a key (`j < seq_len_kv`) and
//! `diagonal - left <= j <= diagonal + right`, a side without a bound reaching the first (or the
//! last) key. Without masking both sides are unbounded; causal masking is the window
//! `(None, Some(0))`: query `i` sees key `j` iff `j + seq_len_q <= i + seq_len_kv`, so the last
//! query sees every key and, with `seq_len_q > seq_len_kv`, the first `seq_len_q - seq_len_kv`
//! queries see none. The keys a query sees are always one range, [`Mask::key_start`]
//! `..` [`Mask::key_end`] (with [`TileMask::key_start`] and [`TileMask::key_end`], its form in
//! tile coordinates, and [`Mask::whole_key_blocks`], in blocks); both ends never decrease from one
//! query to the next.
//!
//! The arithmetic is 32-bit, as cheap as the kernel needs it: the host keeps both sequence
//! lengths at most 2^30 (`MAX_SEQ_LEN`) and the window's offsets within `±2^30`, so
//! `query + 1 + seq_len_kv + offset` fits in u32 and the difference of two such sums in i32.
//! Where the rule bounds a side with the constant offset 0 (the causal diagonal), the offset's
//! terms vanish at compile time: the dense kernels, which know no other window, compile as if
//! the rule had no window at all.

/// The visibility rule of one problem: its sequence lengths and its window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mask {
    seq_len_q: u32,
    seq_len_kv: u32,
    /// Query `i` sees no key before its diagonal key minus `left`; unbounded: from key 0.
    left: WindowSide,
    /// Query `i` sees no key after its diagonal key plus `right`; unbounded: up to the last key.
    right: WindowSide,
}

/// One side of a window: its offset from the diagonal, and whether it bounds anything. A flag
/// beside the offset rather than an `Option`: the dense kernels' PTX, from before windows,
/// tested a `causal` flag, and an `Option`'s tag made LLVM invert that test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct WindowSide {
    bounded: bool,
    offset: i32,
}

impl WindowSide {
    #[inline(always)]
    const fn of(offset: Option<i32>) -> Self {
        match offset {
            Some(offset) => Self {
                bounded: true,
                offset,
            },
            None => Self {
                bounded: false,
                offset: 0,
            },
        }
    }
}

/// `(offset.max(0), (-offset).max(0))` as u32: an offset in `±2^30` as the two non-negative
/// terms that the rule's u32 sums add on either side (0 and 0 for the constant 0, so that they
/// vanish at compile time).
#[inline(always)]
const fn split_offset(offset: i32) -> (u32, u32) {
    if offset >= 0 {
        (offset as u32, 0)
    } else {
        (0, offset.unsigned_abs())
    }
}

impl Mask {
    /// The rule for `seq_len_q` queries against `seq_len_kv` keys (both at most 2^30), causal
    /// (the window `(None, Some(0))`) or not.
    #[inline(always)]
    pub const fn new(seq_len_q: u32, seq_len_kv: u32, causal: bool) -> Self {
        Self {
            seq_len_q,
            seq_len_kv,
            left: WindowSide::of(None),
            right: WindowSide {
                bounded: causal,
                offset: 0,
            },
        }
    }

    /// The rule of the sliding window `(left, right)` (see the module documentation), each
    /// offset within `±2^30`; `None` leaves a side unbounded.
    #[inline(always)]
    pub const fn windowed(
        seq_len_q: u32,
        seq_len_kv: u32,
        left: Option<i32>,
        right: Option<i32>,
    ) -> Self {
        Self {
            seq_len_q,
            seq_len_kv,
            left: WindowSide::of(left),
            right: WindowSide::of(right),
        }
    }

    /// The first key that query `query` (below `seq_len_q`) sees, at most `seq_len_kv`: it
    /// sees keys `key_start(query)..key_end(query)`, none where that range is empty. It never
    /// decreases from one query to the next, so the last query of a block bounds the keys that
    /// the block's queries all see from below.
    #[inline(always)]
    pub fn key_start(self, query: u32) -> u32 {
        if self.left.bounded {
            // query + seq_len_kv - seq_len_q - left, clamped to 0..=seq_len_kv.
            let (left_up, left_down) = split_offset(self.left.offset);
            (query + self.seq_len_kv + left_down)
                .saturating_sub(self.seq_len_q + left_up)
                .min(self.seq_len_kv)
        } else {
            0
        }
    }

    /// The end of the keys that query `query` (below `seq_len_q`) sees (see
    /// [`Self::key_start`]), at most `seq_len_kv`. It never decreases from one query to the
    /// next, so the last query of a block bounds the keys that the block needs.
    #[inline(always)]
    pub fn key_end(self, query: u32) -> u32 {
        self.map_key_end(query, |end| end)
    }

    /// `key_end(query) / BLOCK_KEYS`: the blocks of `BLOCK_KEYS` keys that query `query` sees
    /// up to (those past [`Self::key_start`] whole). For the first query of a block of queries,
    /// the key blocks that no query of it masks at their end.
    #[inline(always)]
    pub fn whole_key_blocks<const BLOCK_KEYS: usize>(self, query: u32) -> u32 {
        self.map_key_end(query, |end| end / BLOCK_KEYS as u32)
    }

    /// `f(key_end(query))` for a non-decreasing `f`, as `min(f(bound), f(seq_len_kv))`. For
    /// [`Self::whole_key_blocks`] the kernel has always divided before the minimum: dividing
    /// after it saves one shift but changes the registers ptxas allocates to some entries.
    #[inline(always)]
    fn map_key_end(self, query: u32, f: impl Fn(u32) -> u32) -> u32 {
        let all = f(self.seq_len_kv);
        if self.right.bounded {
            // query + 1 + seq_len_kv - seq_len_q + right, clamped to 0..=seq_len_kv.
            let (right_up, right_down) = split_offset(self.right.offset);
            f(
                (query + 1 + self.seq_len_kv + right_up)
                    .saturating_sub(self.seq_len_q + right_down),
            )
            .min(all)
        } else {
            all
        }
    }

    /// The signed distance from query `query`'s diagonal key to key `key`, `query + seq_len_kv
    /// - seq_len_q - key`: positive before the diagonal, negative after it (ALiBi's bias is
    /// `-slope * |distance|`).
    #[inline(always)]
    pub fn distance_from_diagonal(self, query: u32, key: u32) -> i64 {
        (query as i64 + self.seq_len_kv as i64) - (self.seq_len_q as i64 + key as i64)
    }

    /// The rule seen from a tile whose rows start at query `first_query` (below `seq_len_q`)
    /// and whose columns start at key `first_key` (below `seq_len_kv`), in tile coordinates: the
    /// form that the kernel applies per element.
    #[inline(always)]
    pub fn in_tile(self, first_query: u32, first_key: u32) -> TileMask {
        TileMask {
            keys_left: (self.seq_len_kv - first_key) as i32,
            diagonal: (first_query + self.seq_len_kv) as i32 - (self.seq_len_q + first_key) as i32,
            left: self.left,
            right: self.right,
        }
    }
}

/// [`Mask`] in the coordinates of one tile (row `r` is query `first_query + r`, column `c` key
/// `first_key + c`), in i32 so that a row that sees none of the tile's keys needs no clamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileMask {
    /// Keys that exist from the tile's first column on (`seq_len_kv - first_key`).
    keys_left: i32,
    /// The column of row 0's diagonal key (may be negative or past `keys_left`): row `r`'s
    /// diagonal key is column `r + diagonal`.
    diagonal: i32,
    left: WindowSide,
    right: WindowSide,
}

impl TileMask {
    /// The end of the columns that tile row `row` sees: column `c` is visible iff
    /// `key_start(row) <= c < key_end(row)`. At most `keys_left`; zero or negative where the
    /// row sees none. Saturating, so that the rows past the last query (computed, never stored)
    /// cannot overflow at the longest sequences.
    #[inline(always)]
    pub fn key_end(self, row: i32) -> i32 {
        if self.right.bounded {
            self.keys_left
                .min((row + self.diagonal + 1).saturating_add(self.right.offset))
        } else {
            self.keys_left
        }
    }

    /// The first column that tile row `row` sees (see [`Self::key_end`]); `None` where the
    /// rule has no left bound (every column from 0). May be negative (the row sees the tile
    /// from column 0) or past the tile.
    #[inline(always)]
    pub fn key_start(self, row: i32) -> Option<i32> {
        if self.left.bounded {
            Some(self.diagonal_column(row).saturating_sub(self.left.offset))
        } else {
            None
        }
    }

    /// The column of tile row `row`'s diagonal key (may lie outside the tile): the distance
    /// from the diagonal of column `c` is `diagonal_column(row) - c`, as
    /// [`Mask::distance_from_diagonal`].
    #[inline(always)]
    pub fn diagonal_column(self, row: i32) -> i32 {
        row + self.diagonal
    }

    /// Every column up to `last_column` that a row from `first_row` on sees lies at or before
    /// the row's diagonal key (distance at least 0): the columns do, or the rule's right side
    /// ends at the diagonal or before it (causal masking's `Some(0)`), which holds for every
    /// block of the problem. ALiBi's bias is then one signed product per score on every block
    /// such rows see, the diagonal's included.
    #[inline(always)]
    pub fn sees_no_key_past_the_diagonal(self, first_row: i32, last_column: i32) -> bool {
        last_column <= self.diagonal_column(first_row)
            || (self.right.bounded && self.right.offset <= 0)
    }

    /// Every column from 0 on that a row up to `last_row` sees lies at or after the row's
    /// diagonal key (distance at most 0): the first column does, or the rule's left side starts
    /// at the diagonal or after it.
    #[inline(always)]
    pub fn sees_no_key_before_the_diagonal(self, last_row: i32) -> bool {
        self.diagonal_column(last_row) <= 0 || (self.left.bounded && self.left.offset <= 0)
    }
}
