//! A warp's register fragments, as types that carry their shape and their layout. Lane `l` of
//! the warp has group `g = l / 4` and position `t = l % 4` in it ([`Lane`]).
//!
//! - [`OperandA`]: a 16x16 A operand (row-major, two 16-bit elements per register).
//! - [`OperandB`]: a 16x8 B operand (k x n, column-major).
//! - [`Accumulator`]: f32 accumulators of `16 M_TILES` rows by `16 N_STEPS` columns, each 16
//!   columns two m16n8 accumulator tiles. A Hopper `wgmma` accumulator of a warp holds its 16
//!   rows in this same order (per 8 columns: rows g and g + 8, columns 2t and 2t + 1), so the
//!   mask and the softmax, written against this type, serve both.
//! - [`LaneRows`]: one value for each accumulator row this lane holds.
//!
//! The instructions that fill them live in [`crate::mma`] and [`crate::ptx`].

use crate::element::Element;

/// A lane of the warp and where it sits in the m16n8 fragment layouts.
#[derive(Clone, Copy)]
pub struct Lane {
    /// `0..32`.
    pub index: usize,
    /// `lane / 4`: this lane's first row of every 16-row tile (the second is `group + 8`).
    pub group: usize,
    /// `lane % 4`: this lane's columns of every 8-column tile are `2 * position` and `+ 1`.
    pub position: usize,
}

impl Lane {
    #[inline(always)]
    pub const fn of(index: usize) -> Self {
        Self {
            index,
            group: index / 4,
            position: index % 4,
        }
    }

    /// This lane's row of accumulator row pair `(m, half_m)`, relative to the fragment's row 0.
    #[inline(always)]
    pub const fn row(self, m: usize, half_m: usize) -> usize {
        16 * m + 8 * half_m + self.group
    }

    /// This lane's first column of every 8-column tile, relative to that tile.
    #[inline(always)]
    pub const fn first_column(self) -> usize {
        2 * self.position
    }

    /// The column of accumulator element `(n, half_n, column)` (see [`Accumulator::element`])
    /// past [`Self::first_column`]: the same for every lane, a compile-time constant in
    /// unrolled loops.
    #[inline(always)]
    pub const fn column_past_first(n: usize, half_n: usize, column: usize) -> usize {
        16 * n + 8 * half_n + column
    }
}

/// A 16x16 A operand of `mma.m16n8k16` (row-major 16-bit elements, two per register): register
/// 0 = (row g, columns 2t, 2t + 1), 1 = (row g + 8, the same), 2 = (row g, columns 2t + 8, +9),
/// 3 = (row g + 8, the same).
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct OperandA(pub [u32; 4]);

/// A 16x8 B operand of `mma.m16n8k16` (k x n, column-major): register 0 = (rows 2t, 2t + 1,
/// column g), 1 = (rows 2t + 8, 2t + 9, column g).
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct OperandB(pub [u32; 2]);

impl OperandB {
    /// The two 16x8 B operands of one `ldmatrix.x4` whose matrices are (k 0-7, n 0-7),
    /// (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15): columns 0-7 and columns 8-15.
    #[inline(always)]
    pub const fn pair_of_x4([r0, r1, r2, r3]: [u32; 4]) -> [Self; 2] {
        [Self([r0, r1]), Self([r2, r3])]
    }
}

/// One m16n8 f32 accumulator tile: elements 0, 1 = (row g, columns 2t, 2t + 1), 2, 3 =
/// (row g + 8, the same).
pub type AccumulatorTile = [f32; 4];

/// f32 accumulators of one warp, `16 M_TILES` rows by `16 N_STEPS` columns:
/// `tiles[m][n][half_n]` is the m16n8 tile of rows `16 m..` and columns `16 n + 8 half_n..`.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct Accumulator<const M_TILES: usize, const N_STEPS: usize> {
    pub tiles: [[[AccumulatorTile; 2]; N_STEPS]; M_TILES],
}

/// One value per accumulator row of this lane: `[m][half_m]`, row `16 m + 8 half_m + g`.
pub type LaneRows<const M_TILES: usize> = [[f32; 2]; M_TILES];

impl<const M_TILES: usize, const N_STEPS: usize> Accumulator<M_TILES, N_STEPS> {
    #[inline(always)]
    pub const fn zero() -> Self {
        Self {
            tiles: [[[[0.0; 4]; 2]; N_STEPS]; M_TILES],
        }
    }

    /// The element of row `(m, half_m)` ([`Lane::row`]) in column
    /// [`Lane::column_past_first`]`(n, half_n, column)`.
    #[inline(always)]
    pub fn element(
        &mut self,
        m: usize,
        half_m: usize,
        n: usize,
        half_n: usize,
        column: usize,
    ) -> &mut f32 {
        &mut self.tiles[m][n][half_n][2 * half_m + column]
    }

    /// Columns `16 n..16 n + 16` of every 16-row tile, rounded to `T` and packed as the A
    /// operand of a next MMA: the m16n8 accumulator pair of a 16-column step holds exactly the
    /// elements that the A layout gives this lane.
    ///
    /// # Safety
    /// None beyond [`Element::pack`]'s.
    #[inline(always)]
    pub unsafe fn to_operand_a<T: Element>(&self, n: usize) -> [OperandA; M_TILES] {
        core::array::from_fn(|m| {
            let [low, high] = self.tiles[m][n];
            OperandA([
                T::pack(low[0], low[1]),
                T::pack(low[2], low[3]),
                T::pack(high[0], high[1]),
                T::pack(high[2], high[3]),
            ])
        })
    }
}
