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
