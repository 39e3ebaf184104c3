//! The shape sweep: sequence-length pairs like FlashAttention's own tests, crossed with head
//! dims, causal, element types, MHA/GQA/MQA and both dense layouts, against the f64 reference.

use flash_attn::{AttentionShape, Element, FlashAttention, ForwardOptions, Layout, TensorStrides};
use half::{bf16, f16};

use crate::support::{gpu, Problem};

/// `(seq_len_q, seq_len_kv)` pairs with tails, decode (Sq = 1) and Sq != Sk.
const TAIL_PAIRS: [(usize, usize); 8] = [
    (1, 1),
    (1, 147),
    (239, 1),
    (799, 3),
    (113, 203),
    (128, 217),
    (108, 256),
    (512, 512),
];
const LONG_PAIRS: [(usize, usize); 3] = [(1023, 1024), (1024, 1023), (4224, 4224)];

/// `(batch, heads_q, heads_kv)`: MHA, GQA (2 query heads per K/V head) and MQA.
const HEAD_CONFIGS: [(usize, usize, usize); 3] = [(2, 2, 2), (1, 4, 2), (1, 3, 1)];

fn check_pairs<T: Element>(gpu: &FlashAttention, pairs: &[(usize, usize)]) {
    for &(seq_len_q, seq_len_kv) in pairs {
        for head_dim in [64, 128] {
            for (batch, heads_q, heads_kv) in HEAD_CONFIGS {
                let shape = AttentionShape {
                    batch,
                    heads_q,
                    heads_kv,
                    seq_len_q,
                    seq_len_kv,
                    head_dim,
                };
                for causal in [false, true] {
                    let problem = Problem::<T>::new(shape, causal, None);
                    for layout in [Layout::Bhsd, Layout::Bshd] {
                        problem.check(gpu, &problem.options(layout, None));
                    }
                }
            }
        }
    }
}

pub(crate) fn tails_and_causal_fp16() {
    let gpu = gpu();
    check_pairs::<f16>(&gpu, &TAIL_PAIRS);
}

pub(crate) fn tails_and_causal_bf16() {
    let gpu = gpu();
    check_pairs::<bf16>(&gpu, &TAIL_PAIRS);
}

pub(crate) fn long_sequences_fp16_and_bf16() {
    let gpu = gpu();
    check_pairs::<f16>(&gpu, &LONG_PAIRS);
    check_pairs::<bf16>(&gpu, &LONG_PAIRS);
}

pub(crate) fn the_anchor_shapes_at_s512() {
    let gpu = gpu();
    for (batch, heads, head_dim) in [(4, 8, 64), (16, 16, 64), (32, 16, 64), (4, 8, 128)] {
        let shape = AttentionShape::new(batch, heads, 512, head_dim);
        for causal in [false, true] {
            let f16_problem = Problem::<f16>::new(shape, causal, None);
            let bf16_problem = Problem::<bf16>::new(shape, causal, None);
            for layout in [Layout::Bhsd, Layout::Bshd] {
                f16_problem.check(&gpu, &f16_problem.options(layout, None));
                bf16_problem.check(&gpu, &bf16_problem.options(layout, None));
            }
        }
    }
}

pub(crate) fn padded_strides_are_honoured() {
    let gpu = gpu();
    // Dense [B, H, S, D] data, read through strides that match it, with the output written to
    // a buffer whose rows are padded by 8 elements and whose heads are 3 rows apart extra.
    let shape = AttentionShape {
        batch: 2,
        heads_q: 4,
        heads_kv: 2,
        seq_len_q: 77,
        seq_len_kv: 150,
        head_dim: 64,
    };
    let problem = Problem::<f16>::new(shape, true, None);
    let dense = |heads: usize, seq: usize| Layout::Bhsd.strides(heads, seq, 64).unwrap();
    let padded_seq = 64 + 8;
    let padded_head = (shape.seq_len_q + 3) as u64 * padded_seq;
    let o = TensorStrides {
        batch: 4 * padded_head,
        head: padded_head,
        seq: padded_seq,
    };
    let options = ForwardOptions {
        causal: true,
        strides: Some(flash_attn::ForwardStrides {
            q: dense(4, 77),
            k: dense(2, 150),
            v: dense(2, 150),
            o,
        }),
        ..Default::default()
    };
    let output = gpu
        .forward_host(&problem.q, &problem.k, &problem.v, shape, &options)
        .unwrap();
    // The same kernel on dense buffers must produce the same bits in every row.
    let dense_output = problem
        .run(&gpu, &problem.options(Layout::Bhsd, None))
        .unwrap()
        .output;
    for b in 0..2 {
        for h in 0..4 {
            for s in 0..77 {
                let row = (b as u64 * o.batch + h as u64 * o.head + s as u64 * o.seq) as usize;
                let dense_row = ((b * 4 + h) * 77 + s) * 64;
                for d in 0..64 {
                    assert_eq!(
                        output[row + d].to_f64(),
                        dense_output[dense_row + d],
                        "b{b} h{h} s{s} d{d}"
                    );
                }
            }
        }
    }
    // The padding between rows is never written (forward_host zero-fills the buffer).
    assert!(output[64..72].iter().all(|x| x.to_f64() == 0.0));
}
