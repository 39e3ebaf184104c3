//! Which keys each query row sees: the visibility rule, written once for the kernels, the CPU
//! reference and the tests.
//!
//! Without masking every query sees every key. Causal masking is aligned to the bottom right,
//! as in FlashAttention: query `i` sees key `j` iff `j + seq_len_q <= i + seq_len_kv`, so the
//! last query sees every key and, with `seq_len_q > seq_len_kv`, the first
//! `seq_len_q - seq_len_kv` queries see none. The keys a query sees are always one range; today
//! it starts at key 0, and [`Mask::key_end`] (with [`TileMask::key_end`], its form in tile
//! coordinates, and [`Mask::whole_key_blocks`], in blocks) is where it ends. A sliding window will add the start of the range beside it.
//!
//! The arithmetic is 32-bit, as cheap as the kernel needs it: the host keeps both sequence
//! lengths at most 2^30 (`MAX_SEQ_LEN`), so `query + 1 + seq_len_kv` fits in u32 and the
//! difference of two such sums in i32, exactly.

/// The visibility rule of one problem: its sequence lengths and whether it is causal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mask {
    seq_len_q: u32,
    seq_len_kv: u32,
    causal: bool,
}

impl Mask {
    /// The rule for `seq_len_q` queries against `seq_len_kv` keys; both at most 2^30.
    #[inline(always)]
    pub const fn new(seq_len_q: u32, seq_len_kv: u32, causal: bool) -> Self {
        Self {
            seq_len_q,
            seq_len_kv,
            causal,
        }
    }

    /// The end of the keys that query `query` (below `seq_len_q`) sees: keys
    /// `0..key_end(query)`, none where it is 0. It never decreases from one query to the next,
    /// so the last query of a block bounds the keys that the block needs.
    #[inline(always)]
    pub fn key_end(self, query: u32) -> u32 {
        self.map_key_end(query, |end| end)
    }

    /// `key_end(query) / BLOCK_KEYS`: the blocks of `BLOCK_KEYS` keys that query `query` sees
    /// whole. For the first query of a block of queries, the key blocks that no query of it
    /// masks.
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
        if self.causal {
            f((query + 1 + self.seq_len_kv).saturating_sub(self.seq_len_q)).min(all)
        } else {
            all
        }
    }

    /// The rule seen from a tile whose rows start at query `first_query` and whose columns
    /// start at key `first_key` (at most `seq_len_kv`), in tile coordinates: the form that the
    /// kernel applies per element.
    #[inline(always)]
    pub fn in_tile(self, first_query: u32, first_key: u32) -> TileMask {
        TileMask {
            keys_left: (self.seq_len_kv - first_key) as i32,
            diagonal: (first_query + self.seq_len_kv) as i32 - (self.seq_len_q + first_key) as i32,
            causal: self.causal,
        }
    }
}

/// [`Mask`] in the coordinates of one tile (row `r` is query `first_query + r`, column `c` key
/// `first_key + c`), in i32 so that a row that sees none of the tile's keys needs no clamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileMask {
    /// Keys that exist from the tile's first column on (`seq_len_kv - first_key`).
    keys_left: i32,
    /// The last column that row 0 sees under the causal rule (may be negative or past
    /// `keys_left`): row `r` sees columns up to `r + diagonal`.
    diagonal: i32,
    causal: bool,
}

impl TileMask {
    /// The end of the columns that tile row `row` sees: column `c` is visible iff
    /// `c < key_end(row)`. At most `keys_left`; zero or negative where the row sees none.
    #[inline(always)]
    pub fn key_end(self, row: i32) -> i32 {
        if self.causal {
            self.keys_left.min(row + self.diagonal + 1)
        } else {
            self.keys_left
        }
    }
}
