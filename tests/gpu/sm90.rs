//! The sm90 family's kernels (sm_90a PTX: wgmma) against the f64 reference on odd shapes, on a
//! device of compute capability 9.0; on any other device each must refuse to load with
//! [`Error::KernelNotForDevice`], not panic or run.

use std::collections::BTreeSet;

use flash_attn::reference::{error_stats, within_tolerance};
use flash_attn::{
    AttentionShape, Dtype, Element, Error, Family, FlashAttention, ForwardKernel, ForwardOptions,
    ForwardStrides, HalfElement, Layout, TensorStrides, Variant,
};
use half::{bf16, f16};

use crate::forward::report_not_applicable;
use crate::support::{gpu, selected_kernels, Problem};

/// `(seq_len_q, seq_len_kv)`: a single row and key, tails of every block size, decode against
/// a long cache, and more queries than keys.
const SEQ_PAIRS: [(usize, usize); 6] = [
    (1, 1),
    (17, 17),
    (100, 257),
    (257, 100),
    (1, 1000),
    (1000, 1000),
];

/// `(batch, heads_q, heads_kv)`: MHA and GQA (2 query heads per K/V head).
const HEAD_CONFIGS: [(usize, usize, usize); 2] = [(1, 2, 2), (2, 4, 2)];

/// Every exposed dense sm90 kernel, causal and not, MHA and GQA, at each of [`SEQ_PAIRS`]
/// (the modified ones: `modifiers::every_sm90_modified_kernel_with_each_modifier`).
pub(crate) fn every_sm90_kernel_on_odd_shapes() {
    let gpu = gpu();
    // A default build has the host/dispatch-table-sm90a.tsv kernels, FLASH_ATTN_KERNELS=all
    // every one; none selected fails.
    let kernels = selected_kernels("dense sm90", |kernel| {
        kernel.spec.family == Family::Sm90 && kernel.spec.variant == Variant::Dense
    });
    let first = kernels[0];
    if !first.runs_on(gpu.compute_capability()) {
        let names: BTreeSet<&str> = kernels.iter().map(|kernel| kernel.entry).collect();
        report_not_applicable(&gpu, &names);
        for kernel in kernels {
            let shape = AttentionShape::new(1, 1, 17, kernel.spec.tile.head_dim);
            let result = match kernel.spec.dtype {
                Dtype::F16 => {
                    let problem = Problem::<f16>::new(shape, false, None);
                    problem.run(&gpu, &problem.options(Layout::Bhsd, Some(kernel)))
                }
                Dtype::Bf16 => {
                    let problem = Problem::<bf16>::new(shape, false, None);
                    problem.run(&gpu, &problem.options(Layout::Bhsd, Some(kernel)))
                }
            };
            assert!(
                matches!(result, Err(Error::KernelNotForDevice { kernel: entry, family: Family::Sm90, .. }) if entry == kernel.entry),
                "{}: expected KernelNotForDevice, got {:?}",
                kernel.entry,
                result.map(|_| ())
            );
        }
        return;
    }
    for kernel in kernels {
        for (seq_len_q, seq_len_kv) in SEQ_PAIRS {
            for (batch, heads_q, heads_kv) in HEAD_CONFIGS {
                let shape = AttentionShape {
                    batch,
                    heads_q,
                    heads_kv,
                    seq_len_q,
                    seq_len_kv,
                    head_dim: kernel.spec.tile.head_dim,
                };
                for causal in [false, true] {
                    match kernel.spec.dtype {
                        Dtype::F16 => {
                            let problem = Problem::<f16>::new(shape, causal, None);
                            problem.check(&gpu, &problem.options(Layout::Bhsd, Some(kernel)));
                        }
                        Dtype::Bf16 => {
                            let problem = Problem::<bf16>::new(shape, causal, None);
                            problem.check(&gpu, &problem.options(Layout::Bhsd, Some(kernel)));
                        }
                    }
                }
            }
        }
    }
}

/// Every exposed dense kernel that copies by TMA (`KernelSpec::copies_by_tma`: its tensor
/// maps carry the strides; the modified ones: `modifiers::`), reading Q, K and V through
/// strides other than a packed `[B, H, S, D]`: all four tensors `[B, S, H, D]` (a head's rows
/// `H * D` apart), and Q, K and V in rows padded by 8 NaN elements with 3 NaN rows more between
/// heads, so that a box read past a row or a head would reach the output. MHA and GQA, causal
/// and not, on odd lengths. On a device of another compute capability each must refuse to load.
pub(crate) fn every_tma_kernel_through_other_strides() {
    let gpu = gpu();
    let kernels = selected_kernels("dense TMA sm90", |kernel| {
        kernel.spec.copies_by_tma() && kernel.spec.variant == Variant::Dense
    });
    if !kernels[0].runs_on(gpu.compute_capability()) {
        let names: BTreeSet<&str> = kernels.iter().map(|kernel| kernel.entry).collect();
        report_not_applicable(&gpu, &names);
        for kernel in kernels {
            let shape = AttentionShape::new(1, 1, 17, kernel.spec.tile.head_dim);
            let problem = Problem::<f16>::new(shape, false, None);
            let result = problem.run(&gpu, &problem.options(Layout::Bhsd, Some(kernel)));
            assert!(
                matches!(result, Err(Error::KernelNotForDevice { .. })),
                "{}: expected KernelNotForDevice, got {:?}",
                kernel.entry,
                result.map(|_| ())
            );
        }
        return;
    }
    for kernel in kernels {
        for (batch, heads_q, heads_kv) in HEAD_CONFIGS {
            let shape = AttentionShape {
                batch,
                heads_q,
                heads_kv,
                seq_len_q: 77,
                seq_len_kv: 201,
                head_dim: kernel.spec.tile.head_dim,
            };
            for causal in [false, true] {
                match kernel.spec.dtype {
                    Dtype::F16 => check_other_strides::<f16>(&gpu, kernel, shape, causal),
                    Dtype::Bf16 => check_other_strides::<bf16>(&gpu, kernel, shape, causal),
                }
            }
        }
    }
}

/// [`every_tma_kernel_through_other_strides`] for one kernel, shape and masking.
fn check_other_strides<T: Element + HalfElement>(
    gpu: &FlashAttention,
    kernel: &'static ForwardKernel,
    shape: AttentionShape,
    causal: bool,
) {
    let problem = Problem::<T>::new(shape, causal, None);
    problem.check(gpu, &problem.options(Layout::Bhsd, Some(kernel)));

    let d = shape.head_dim;
    let padded_row = d + 8;
    // A dense `[B, H, S, D]` tensor of `rows` rows a head in padded rows, NaN between them,
    // and its strides.
    let padded = |dense: &[T], rows: usize| {
        let padded_head = (rows + 3) * padded_row;
        let mut padded = vec![T::from_f64(f64::NAN); dense.len() / (rows * d) * padded_head];
        for (slice, row) in dense.chunks(d).enumerate() {
            let (head, token) = (slice / rows, slice % rows);
            let at = head * padded_head + token * padded_row;
            padded[at..at + d].copy_from_slice(row);
        }
        let heads = dense.len() / (shape.batch * rows * d);
        let strides = TensorStrides {
            batch: (heads * padded_head) as u64,
            head: padded_head as u64,
            seq: padded_row as u64,
        };
        (padded, strides)
    };
    let (q, q_strides) = padded(&problem.q, shape.seq_len_q);
    let (k, kv_strides) = padded(&problem.k, shape.seq_len_kv);
    let (v, _) = padded(&problem.v, shape.seq_len_kv);
    let o_strides = Layout::Bhsd
        .strides(shape.heads_q, shape.seq_len_q, d)
        .unwrap();
    let options = ForwardOptions {
        strides: Some(ForwardStrides {
            q: q_strides,
            k: kv_strides,
            v: kv_strides,
            o: o_strides,
        }),
        ..problem.options(Layout::Bhsd, Some(kernel))
    };
    let output = gpu
        .forward_host(&q, &k, &v, shape, &options)
        .unwrap_or_else(|error| panic!("{}: {error}", kernel.entry));
    let ours = error_stats(output.iter().map(|x| x.to_f64()), &problem.reference.output);
    assert!(
        within_tolerance(&ours, &problem.plain_error),
        "{} {shape:?} causal={causal}, Q, K and V in padded rows: ours {ours:?}, plain {:?} \
         (seed {})",
        kernel.entry,
        problem.plain_error,
        problem.seed
    );
}
