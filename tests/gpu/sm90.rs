//! The sm90 family's kernels (sm_90a PTX: wgmma) against the f64 reference on odd shapes, on a
//! device of compute capability 9.0; on any other device each must refuse to load with
//! [`Error::KernelNotForDevice`], not panic or run.

use std::collections::BTreeSet;

use flash_attn::{AttentionShape, Dtype, Error, Family, Layout, Variant};
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
