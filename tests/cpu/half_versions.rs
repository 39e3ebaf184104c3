//! half 2's element types (feature `half2`): the safe API views them as half 1.8's of the same
//! bits ([`HalfElement`]), which is right only if every bit pattern means the same value in
//! both versions and each half 2 type maps to the half 1.8 type of its own format.

use flash_attn::reference::{
    attention, attention_paged_kv_cache, random_normal, Precision, Scoring,
};
use flash_attn::{AttentionShape, Dtype, Element, HalfElement, PagedKvCache};

/// Every one of the 65,536 bit patterns of `T` reads as the same value through `T`'s own
/// conversion (`own`) and through its half 1.8 type: NaN as NaN, each zero and infinity with its
/// sign, every other value exactly.
fn assert_every_bit_pattern_means_the_same<T: HalfElement>(
    from_bits: fn(u16) -> T,
    own: fn(T) -> f64,
) {
    for bits in 0..=u16::MAX {
        let value = from_bits(bits);
        let half1: T::Half1 = bytemuck::cast(value);
        let (expected, viewed) = (own(value), half1.to_f64());
        assert!(
            (expected.is_nan() && viewed.is_nan())
                || (expected == viewed && expected.is_sign_negative() == viewed.is_sign_negative()),
            "bits {bits:#06x}: half 2 reads {expected}, the half 1.8 view {viewed}"
        );
    }
}

#[test]
fn every_half2_f16_bit_pattern_is_the_half1_f16_of_the_same_bits() {
    assert_every_bit_pattern_means_the_same(half2::f16::from_bits, half2::f16::to_f64);
    assert_eq!(<half2::f16 as HalfElement>::Half1::DTYPE, Dtype::F16);
}

#[test]
fn every_half2_bf16_bit_pattern_is_the_half1_bf16_of_the_same_bits() {
    assert_every_bit_pattern_means_the_same(half2::bf16::from_bits, half2::bf16::to_f64);
    assert_eq!(<half2::bf16 as HalfElement>::Half1::DTYPE, Dtype::Bf16);
}

/// The reference on half 2 inputs, and the random inputs it is given, are those of half 1.8:
/// `random_normal` makes the same bits for both versions, and `attention` and
/// `attention_paged_kv_cache` read them as the same values.
fn assert_the_reference_reads_half2_as_half1<Half2, Half1>(dtype: Dtype)
where
    Half2: HalfElement<Half1 = Half1> + PartialEq + std::fmt::Debug,
    Half1: Element + PartialEq + std::fmt::Debug,
{
    let shape = AttentionShape {
        batch: 2,
        heads_q: 4,
        heads_kv: 2,
        seq_len_q: 5,
        seq_len_kv: 17,
        head_dim: 64,
    };
    let inputs = |len, seed| {
        let half2: Vec<Half2> = random_normal(len, 0.5, 1.0, seed);
        let half1: Vec<Half1> = random_normal(len, 0.5, 1.0, seed);
        let as_bits: Vec<Half1> = half2.iter().map(|&x| bytemuck::cast(x)).collect();
        assert_eq!(
            as_bits, half1,
            "random_normal's bits differ between the versions"
        );
        (half2, half1)
    };
    let (q_len, kv_len) = (shape.q_elements().unwrap(), shape.kv_elements().unwrap());
    let ((q2, q1), (k2, k1), (v2, v1)) = (inputs(q_len, 1), inputs(kv_len, 2), inputs(kv_len, 3));
    for causal in [false, true] {
        let precision = Precision::Mixed(dtype);
        let from_half2 = attention(&q2, &k2, &v2, shape, 0.125, causal, precision);
        let from_half1 = attention(&q1, &k1, &v1, shape, 0.125, causal, precision);
        assert_eq!(from_half2, from_half1, "causal {causal}");
    }
    // A paged cache of 16-key pages, two per sequence, used to 17 and 9 keys, the pages in
    // reverse.
    let paged_shape = AttentionShape {
        seq_len_kv: 32,
        ..shape
    };
    let paged_cache = PagedKvCache {
        num_pages: shape.batch * 2,
        page_size: 16,
        pages_per_sequence: 2,
    };
    let pages_len = paged_cache.num_pages * 16 * shape.heads_kv * shape.head_dim;
    let ((k2, k1), (v2, v1)) = (inputs(pages_len, 4), inputs(pages_len, 5));
    let block_table: Vec<u32> = (0..paged_cache.num_pages as u32).rev().collect();
    let cache_lens = [17, 9];
    let from_half2 = attention_paged_kv_cache(
        &q2,
        &k2,
        &v2,
        &block_table,
        &cache_lens,
        paged_shape,
        &paged_cache,
        &Scoring::plain(0.125, true),
        Precision::Mixed(dtype),
    );
    let from_half1 = attention_paged_kv_cache(
        &q1,
        &k1,
        &v1,
        &block_table,
        &cache_lens,
        paged_shape,
        &paged_cache,
        &Scoring::plain(0.125, true),
        Precision::Mixed(dtype),
    );
    assert_eq!(from_half2, from_half1, "paged");
}

#[test]
fn the_reference_reads_half2_f16_as_half1_f16() {
    assert_the_reference_reads_half2_as_half1::<half2::f16, half::f16>(Dtype::F16);
}

#[test]
fn the_reference_reads_half2_bf16_as_half1_bf16() {
    assert_the_reference_reads_half2_as_half1::<half2::bf16, half::bf16>(Dtype::Bf16);
}
