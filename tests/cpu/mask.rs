//! The visibility rule ([`Mask`], shared by the kernels and the CPU reference) against its
//! definition, checked key by key.

use flash_attn::{Mask, MAX_SEQ_LEN};

/// The definition: without masking every key; causal, aligned to the bottom right, query `i`
/// sees key `j` iff `j + seq_len_q <= i + seq_len_kv`. Wide arithmetic, no shortcut.
fn visible(seq_len_q: u32, seq_len_kv: u32, causal: bool, query: u32, key: u32) -> bool {
    key < seq_len_kv
        && (!causal || key as u64 + seq_len_q as u64 <= query as u64 + seq_len_kv as u64)
}

/// Odd, even, equal and unequal lengths, either longer, around the kernels' block sizes.
const LENGTHS: [u32; 12] = [1, 2, 3, 5, 7, 16, 17, 31, 63, 64, 65, 129];

#[test]
fn key_end_bounds_exactly_the_visible_keys_and_whole_blocks_divide_it() {
    for seq_len_q in LENGTHS {
        for seq_len_kv in LENGTHS {
            for causal in [false, true] {
                let mask = Mask::new(seq_len_q, seq_len_kv, causal);
                for query in 0..seq_len_q {
                    let key_end = mask.key_end(query);
                    assert!(key_end <= seq_len_kv);
                    assert_eq!(mask.whole_key_blocks::<1>(query), key_end);
                    assert_eq!(mask.whole_key_blocks::<16>(query), key_end / 16);
                    assert_eq!(mask.whole_key_blocks::<32>(query), key_end / 32);
                    assert_eq!(mask.whole_key_blocks::<64>(query), key_end / 64);
                    for key in 0..seq_len_kv + 2 {
                        assert_eq!(
                            key < key_end,
                            visible(seq_len_q, seq_len_kv, causal, query, key),
                            "{seq_len_q} queries, {seq_len_kv} keys, causal {causal}: \
                             query {query}, key {key}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn the_tile_form_is_the_same_rule() {
    // Tiles as the kernel forms them: rows from a multiple of the block height (including
    // rows past the last query, which the kernel computes but never stores), columns from a
    // multiple of the block width below the last key, and columns past the last key.
    for seq_len_q in LENGTHS {
        for seq_len_kv in LENGTHS {
            for causal in [false, true] {
                let mask = Mask::new(seq_len_q, seq_len_kv, causal);
                for (block_m, block_n) in [(16, 16), (64, 32), (128, 64)] {
                    for first_query in (0..seq_len_q).step_by(block_m) {
                        for first_key in (0..seq_len_kv).step_by(block_n) {
                            let tile = mask.in_tile(first_query, first_key);
                            for row in 0..block_m as u32 {
                                let key_end = tile.key_end(row as i32);
                                assert!(key_end <= (seq_len_kv - first_key) as i32);
                                let query = first_query + row;
                                for column in 0..block_n as u32 {
                                    let expected = query < seq_len_q
                                        && visible(
                                            seq_len_q,
                                            seq_len_kv,
                                            causal,
                                            query,
                                            first_key + column,
                                        );
                                    if query < seq_len_q {
                                        assert_eq!(
                                            (column as i32) < key_end,
                                            expected,
                                            "{seq_len_q} queries, {seq_len_kv} keys, causal \
                                             {causal}: tile ({first_query}, {first_key}), row \
                                             {row}, column {column}"
                                        );
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn the_rule_is_exact_at_the_longest_sequences() {
    let longest = MAX_SEQ_LEN as u32;
    for (seq_len_q, seq_len_kv) in [
        (longest, longest),
        (longest, 1),
        (1, longest),
        (longest - 1, longest),
        (longest, longest - 3),
    ] {
        let mask = Mask::new(seq_len_q, seq_len_kv, true);
        for query in [
            0,
            1,
            seq_len_q / 2,
            seq_len_q.saturating_sub(2),
            seq_len_q - 1,
        ] {
            if query >= seq_len_q {
                continue;
            }
            let key_end = mask.key_end(query);
            // The visible keys are those before `key_end`: check at the boundary.
            if key_end > 0 {
                assert!(visible(seq_len_q, seq_len_kv, true, query, key_end - 1));
            }
            assert!(!visible(seq_len_q, seq_len_kv, true, query, key_end));
            // The tile form at the extreme tiles of this row, as the kernel's masked blocks
            // form them.
            for first_key in [0, key_end.saturating_sub(1), seq_len_kv - 1] {
                let tile = mask.in_tile(query, first_key);
                let tile_end = tile.key_end(0) as i64;
                let expected = key_end as i64 - first_key as i64;
                assert_eq!(
                    tile_end.max(0),
                    expected.max(0),
                    "{seq_len_q} queries, {seq_len_kv} keys: query {query}, first key {first_key}"
                );
            }
        }
    }
}

/// The definition of a sliding window, in wide arithmetic: query `i` sits on key
/// `d = i + seq_len_kv - seq_len_q` and sees key `j` iff `j` is a key and
/// `d - left <= j <= d + right`, an unbounded side bounding nothing.
fn visible_in_window(
    (seq_len_q, seq_len_kv): (u32, u32),
    (left, right): (Option<i32>, Option<i32>),
    query: u32,
    key: u32,
) -> bool {
    let diagonal = query as i64 + seq_len_kv as i64 - seq_len_q as i64;
    let key = key as i64;
    key < seq_len_kv as i64
        && left.is_none_or(|left| key >= diagonal - left as i64)
        && right.is_none_or(|right| key <= diagonal + right as i64)
}

/// Windows around the diagonal, one-sided and two-sided, some leaving the diagonal out, some
/// wider than the lengths: offsets as the host passes them (it normalises sides that bound
/// nothing, but the rule must hold for any offset within ±2^30).
const WINDOWS: [(Option<i32>, Option<i32>); 14] = [
    (None, None),
    (None, Some(0)),
    (Some(0), Some(0)),
    (Some(3), Some(0)),
    (Some(16), Some(0)),
    (Some(0), None),
    (Some(2), Some(5)),
    (None, Some(-3)),
    (Some(-2), Some(7)),
    (Some(9), Some(-4)),
    (Some(40), None),
    (None, Some(70)),
    (Some(1 << 30), Some(-(1 << 30) + 5)),
    (Some(-(1 << 30) + 2), Some(1 << 30)),
];

#[test]
fn a_window_sees_exactly_the_keys_between_key_start_and_key_end() {
    for seq_len_q in LENGTHS {
        for seq_len_kv in LENGTHS {
            for (left, right) in WINDOWS {
                let mask = Mask::windowed(seq_len_q, seq_len_kv, left, right);
                let (mut previous_start, mut previous_end) = (0, 0);
                for query in 0..seq_len_q {
                    let (start, end) = (mask.key_start(query), mask.key_end(query));
                    assert!(start <= seq_len_kv && end <= seq_len_kv);
                    // Both ends never decrease: the kernel bounds a block by its first and
                    // last query.
                    assert!(start >= previous_start && end >= previous_end);
                    (previous_start, previous_end) = (start, end);
                    assert_eq!(mask.whole_key_blocks::<16>(query), end / 16);
                    for key in 0..seq_len_kv + 2 {
                        assert_eq!(
                            start <= key && key < end,
                            visible_in_window((seq_len_q, seq_len_kv), (left, right), query, key),
                            "{seq_len_q} queries, {seq_len_kv} keys, window ({left:?}, \
                             {right:?}): query {query}, key {key}"
                        );
                        let distance =
                            query as i64 + seq_len_kv as i64 - seq_len_q as i64 - key as i64;
                        assert_eq!(mask.distance_from_diagonal(query, key), distance);
                    }
                }
            }
        }
    }
}

#[test]
fn causal_masking_is_the_window_none_zero_and_no_masking_the_window_none_none() {
    for seq_len_q in LENGTHS {
        for seq_len_kv in LENGTHS {
            assert_eq!(
                Mask::new(seq_len_q, seq_len_kv, true),
                Mask::windowed(seq_len_q, seq_len_kv, None, Some(0))
            );
            assert_eq!(
                Mask::new(seq_len_q, seq_len_kv, false),
                Mask::windowed(seq_len_q, seq_len_kv, None, None)
            );
        }
    }
}

#[test]
fn the_tile_form_of_a_window_is_the_same_rule() {
    for seq_len_q in LENGTHS {
        for seq_len_kv in LENGTHS {
            for (left, right) in WINDOWS {
                let mask = Mask::windowed(seq_len_q, seq_len_kv, left, right);
                for (block_m, block_n) in [(16, 16), (64, 32), (128, 64)] {
                    for first_query in (0..seq_len_q).step_by(block_m) {
                        for first_key in (0..seq_len_kv).step_by(block_n) {
                            let tile = mask.in_tile(first_query, first_key);
                            for row in 0..block_m as u32 {
                                let query = first_query + row;
                                if query >= seq_len_q {
                                    // Rows past the last query are computed, never stored:
                                    // the form need only not overflow there.
                                    tile.key_end(row as i32);
                                    tile.key_start(row as i32);
                                    continue;
                                }
                                let end = tile.key_end(row as i32);
                                let start = tile.key_start(row as i32);
                                assert_eq!(start.is_some(), left.is_some());
                                for column in 0..block_n as u32 {
                                    let key = first_key + column;
                                    let seen = (column as i32) < end
                                        && start.is_none_or(|start| column as i32 >= start);
                                    assert_eq!(
                                        seen,
                                        visible_in_window(
                                            (seq_len_q, seq_len_kv),
                                            (left, right),
                                            query,
                                            key
                                        ),
                                        "{seq_len_q} queries, {seq_len_kv} keys, window \
                                         ({left:?}, {right:?}): tile ({first_query}, \
                                         {first_key}), row {row}, column {column}"
                                    );
                                    let distance =
                                        tile.diagonal_column(row as i32) as i64 - column as i64;
                                    assert_eq!(distance, mask.distance_from_diagonal(query, key));
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// ALiBi's one-sided bodies (`attn::modifiers::add_alibi`) trust these two claims: where
/// `sees_no_key_past_the_diagonal(first_row, last_column)` holds, no key that a query of rows
/// `first_row..` sees among columns `..=last_column` lies past its diagonal; where
/// `sees_no_key_before_the_diagonal(last_row)` holds, none that a query of rows `..=last_row`
/// sees lies before it. Checked key by key over every window, tile and warp's rows (16 at a
/// time, and a single row as a packed decode block's); and causal masking, whose every block
/// should take the one-sided body, must pass the first on every tile.
#[test]
fn the_alibi_side_claims_hold_for_every_key_a_warp_sees() {
    for seq_len_q in LENGTHS {
        for seq_len_kv in LENGTHS {
            for (left, right) in WINDOWS {
                let mask = Mask::windowed(seq_len_q, seq_len_kv, left, right);
                let causal = (left, right) == (None, Some(0));
                for (block_m, block_n) in [(16, 16), (64, 32), (128, 64), (128, 128)] {
                    for first_query in (0..seq_len_q).step_by(block_m) {
                        for first_key in (0..seq_len_kv).step_by(block_n) {
                            let tile = mask.in_tile(first_query, first_key);
                            let last_column = block_n as i32 - 1;
                            let warps = (0..block_m as i32)
                                .step_by(16)
                                .map(|first| (first, first + 15))
                                .chain([(0, 0)]);
                            for (first_row, last_row) in warps {
                                let after =
                                    tile.sees_no_key_past_the_diagonal(first_row, last_column);
                                let before = tile.sees_no_key_before_the_diagonal(last_row);
                                assert!(
                                    after || !causal,
                                    "{seq_len_q} queries, {seq_len_kv} keys, causal: tile \
                                     ({first_query}, {first_key}), rows {first_row}.."
                                );
                                for row in first_row..=last_row {
                                    let query = first_query + row as u32;
                                    if query >= seq_len_q {
                                        continue;
                                    }
                                    for column in 0..block_n as u32 {
                                        let key = first_key + column;
                                        if !visible_in_window(
                                            (seq_len_q, seq_len_kv),
                                            (left, right),
                                            query,
                                            key,
                                        ) {
                                            continue;
                                        }
                                        let distance = mask.distance_from_diagonal(query, key);
                                        let context = format!(
                                            "{seq_len_q} queries, {seq_len_kv} keys, window \
                                             ({left:?}, {right:?}): tile ({first_query}, \
                                             {first_key}), rows {first_row}..={last_row}, row \
                                             {row}, column {column}, distance {distance}"
                                        );
                                        assert!(!after || distance >= 0, "{context}");
                                        assert!(!before || distance <= 0, "{context}");
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The key blocks a kernel computes for one block of queries, from the rule's methods as
/// `fwd/sm80.rs` combines them (`BlockInfo::key_blocks` and the modified kernels' three loops):
/// `(first, unmasked_start, unmasked_end, end)`.
fn kernel_key_blocks(mask: Mask, first_query: u32, last_query: u32, block_n: u32) -> [u32; 4] {
    let end = mask.key_end(last_query).div_ceil(block_n);
    let first = (mask.key_start(first_query) / block_n).min(end);
    let unmasked_start = mask
        .key_start(last_query)
        .div_ceil(block_n)
        .max(first)
        .min(end);
    let unmasked_end = (mask.key_end(first_query) / block_n)
        .max(unmasked_start)
        .min(end);
    [first, unmasked_start, unmasked_end, end]
}

#[test]
fn the_blocks_a_window_computes_hold_every_visible_key_and_unmasked_ones_only_visible_keys() {
    for seq_len_q in LENGTHS {
        for seq_len_kv in LENGTHS {
            for (left, right) in WINDOWS {
                let mask = Mask::windowed(seq_len_q, seq_len_kv, left, right);
                for (block_m, block_n) in [(16u32, 16u32), (64, 32), (128, 64), (64, 64)] {
                    for first_query in (0..seq_len_q).step_by(block_m as usize) {
                        let last_query = (first_query + block_m).min(seq_len_q) - 1;
                        let [first, unmasked_start, unmasked_end, end] =
                            kernel_key_blocks(mask, first_query, last_query, block_n);
                        assert!(first <= unmasked_start);
                        assert!(unmasked_start <= unmasked_end && unmasked_end <= end);
                        let context = format!(
                            "{seq_len_q} queries, {seq_len_kv} keys, window ({left:?}, \
                             {right:?}), tile {block_m}x{block_n} from query {first_query}"
                        );
                        for block in 0..seq_len_kv.div_ceil(block_n) {
                            let keys = block * block_n..((block + 1) * block_n).min(seq_len_kv);
                            let queries = first_query..=last_query;
                            let seen_by = |query: u32| {
                                keys.clone().filter(move |&key| {
                                    visible_in_window(
                                        (seq_len_q, seq_len_kv),
                                        (left, right),
                                        query,
                                        key,
                                    )
                                })
                            };
                            let computed = (first..end).contains(&block);
                            // A skipped block holds no key that a query of the block sees.
                            if !computed {
                                assert!(
                                    queries.clone().all(|query| seen_by(query).next().is_none()),
                                    "{context}: block {block} is skipped but seen"
                                );
                            }
                            // An unmasked block holds only keys that every query sees, whole.
                            if (unmasked_start..unmasked_end).contains(&block) {
                                assert!(
                                    queries.clone().all(|query| {
                                        seen_by(query).count() == block_n as usize
                                    }),
                                    "{context}: block {block} is unmasked but not seen whole"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn a_window_is_exact_at_the_longest_sequences() {
    let longest = MAX_SEQ_LEN as u32;
    for (seq_len_q, seq_len_kv) in [(longest, longest), (longest, 1), (1, longest)] {
        // The offsets the host passes: within ±2^30, an unbounded side as the one that bounds
        // nothing.
        for (left, right) in [
            (seq_len_kv as i32 - 1, seq_len_q as i32 - 1),
            (4096, 0),
            (0, seq_len_q as i32 - 1),
            (1 - seq_len_q as i32 + 7, 2),
            (5, 1 - seq_len_kv as i32 + 3),
        ] {
            if left + right < 0 {
                continue;
            }
            let window = (Some(left), Some(right));
            let mask = Mask::windowed(seq_len_q, seq_len_kv, window.0, window.1);
            for query in [
                0,
                1,
                seq_len_q / 2,
                seq_len_q.saturating_sub(2),
                seq_len_q - 1,
            ] {
                if query >= seq_len_q {
                    continue;
                }
                let (start, end) = (mask.key_start(query), mask.key_end(query));
                let lengths = (seq_len_q, seq_len_kv);
                if start < end {
                    assert!(visible_in_window(lengths, window, query, start));
                    assert!(visible_in_window(lengths, window, query, end - 1));
                }
                assert!(start == 0 || !visible_in_window(lengths, window, query, start - 1));
                assert!(!visible_in_window(lengths, window, query, end));
                // The tile form, rows past the last query included (saturating, never
                // wrapping), at the first tile that holds the query's keys.
                let first_key = start.min(seq_len_kv - 1);
                let tile = mask.in_tile(query, first_key);
                for row in [127, 255] {
                    tile.key_end(row);
                    tile.key_start(row);
                }
                if start < end {
                    assert_eq!(
                        tile.key_end(0).max(0) as i64,
                        end as i64 - first_key as i64,
                        "{lengths:?} ({left}, {right}): query {query}"
                    );
                    assert_eq!(
                        tile.key_start(0).unwrap().max(0) as i64,
                        start as i64 - first_key as i64
                    );
                }
            }
        }
    }
}
