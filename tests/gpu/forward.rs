//! Every exposed kernel against the f64 reference, at the seed shape and over S = 128..4096,
//! and at every head dim: each kernel head dim, and problems padded to one.

use flash_attn::{
    kernel_head_dim, padded_head_dim, AttentionShape, Dtype, FlashAttention, ForwardOptions,
    Layout, Variant, FORWARD_KERNELS, SUPPORTED_HEAD_DIMS,
};
use half::{bf16, f16};

use crate::support::{gpu, in_kernel_shard, Problem};

/// Every kernel of the head dim each shape runs on, causal and not, fp16 and bf16: every dense
/// one of its own head dim (of every family the device runs: the sm90 family's on compute
/// capability 9.0), or every modified one of the head dim it pads to (the kernels that pad).
/// Kernels of a family the device cannot run are reported as not applicable, with the reason.
fn check_every_kernel(shapes: &[AttentionShape]) {
    let gpu = gpu();
    let compute_capability = gpu.compute_capability();
    let mut not_applicable = std::collections::BTreeSet::new();
    // A filter or shard that selects no kernel must fail, not pass having checked nothing.
    let mut checked = 0;
    for &shape in shapes {
        let variant = if padded_head_dim(shape.head_dim) == Some(shape.head_dim) {
            Variant::Dense
        } else {
            Variant::Modified
        };
        for causal in [false, true] {
            let f16_problem = Problem::<f16>::new(shape, causal, None);
            let bf16_problem = Problem::<bf16>::new(shape, causal, None);
            for kernel in FORWARD_KERNELS
                .iter()
                .filter(|k| k.spec.variant == variant)
                .filter(|k| {
                    kernel_head_dim(k.spec.dtype, variant, shape.head_dim)
                        == Ok(k.spec.tile.head_dim)
                        && in_kernel_shard(k)
                })
            {
                if !kernel.runs_on(compute_capability) {
                    not_applicable.insert(kernel.entry);
                    continue;
                }
                match kernel.spec.dtype {
                    Dtype::F16 => {
                        f16_problem.check(&gpu, &f16_problem.options(Layout::Bhsd, Some(kernel)))
                    }
                    Dtype::Bf16 => {
                        bf16_problem.check(&gpu, &bf16_problem.options(Layout::Bhsd, Some(kernel)))
                    }
                };
                checked += 1;
            }
        }
    }
    report_not_applicable(&gpu, &not_applicable);
    assert!(
        checked > 0,
        "no kernel was checked (FLASH_ATTN_KERNEL_FILTER / FLASH_ATTN_KERNEL_SHARD select none)"
    );
}

/// One line naming the kernels `gpu` cannot run and why, where there are any.
pub(crate) fn report_not_applicable(
    gpu: &FlashAttention,
    not_applicable: &std::collections::BTreeSet<&str>,
) {
    if let Some(first) = not_applicable.first() {
        let (major, minor) = gpu.compute_capability();
        eprintln!(
            "not applicable on {} (compute capability {major}.{minor}): {} kernels whose family's \
             PTX targets this device cannot run (the sm90 family's sm_90a PTX runs on 9.0 only), \
             first {first}",
            gpu.device_name(),
            not_applicable.len()
        );
    }
}

/// Every kernel on a small problem of its head dim, with a tail, and two problems padded to a
/// kernel head dim: the sanitizer runs' test.
pub(crate) fn every_kernel_on_a_small_problem() {
    check_every_kernel(&[
        AttentionShape::new(1, 2, 256, 64),
        AttentionShape::new(1, 2, 200, 128),
        AttentionShape::new(1, 2, 130, 32),
        AttentionShape::new(1, 2, 130, 96),
        AttentionShape::new(1, 2, 130, 160),
        AttentionShape::new(1, 2, 130, 192),
        AttentionShape::new(1, 2, 130, 224),
        AttentionShape::new(1, 2, 130, 256),
        AttentionShape::new(1, 2, 100, 40),
        AttentionShape::new(1, 2, 100, 200),
    ]);
}

pub(crate) fn every_kernel_at_the_seed_shape() {
    check_every_kernel(&[
        AttentionShape::new(4, 8, 512, 64),
        AttentionShape::new(4, 8, 512, 128),
    ]);
}

pub(crate) fn every_kernel_for_sequence_lengths_128_to_4096() {
    let shapes: Vec<_> = [
        (1, 3, 128),
        (2, 2, 192),
        (1, 2, 384),
        (1, 2, 1024),
        (1, 2, 2048),
        (1, 1, 4096),
    ]
    .into_iter()
    .flat_map(|(b, h, s)| {
        [
            AttentionShape::new(b, h, s, 64),
            AttentionShape::new(b, h, s, 128),
        ]
    })
    .collect();
    check_every_kernel(&shapes);
}

pub(crate) fn every_kernel_for_batch_and_head_variations() {
    check_every_kernel(&[
        AttentionShape::new(1, 1, 512, 64),
        AttentionShape::new(3, 5, 256, 64),
        AttentionShape::new(16, 16, 128, 64),
        AttentionShape::new(2, 40, 128, 128),
    ]);
}

/// The head dims beyond 64 and 128: every kernel of each, at an odd length, and of each
/// kernel head dim at the largest head dim padded to it and at the smallest.
pub(crate) fn every_kernel_at_every_kernel_head_dim() {
    let mut shapes = Vec::new();
    let mut smaller = 0;
    for &head_dim in SUPPORTED_HEAD_DIMS {
        shapes.push(AttentionShape::new(1, 2, 201, head_dim));
        // The padded head dims of this kernel head dim: the largest and the smallest.
        for padded in [head_dim - 8, smaller + 8] {
            if padded > smaller && padded < head_dim {
                shapes.push(AttentionShape {
                    seq_len_q: 77,
                    ..AttentionShape::new(1, 2, 130, padded)
                });
            }
        }
        smaller = head_dim;
    }
    shapes.dedup();
    check_every_kernel(&shapes);
}

/// Every multiple of 8 from 8 to 256 through the default API (the dispatch table's kernel),
/// with grouped heads, both layouts and a query length unlike the key length.
pub(crate) fn every_head_dim_through_the_default_api() {
    let gpu = gpu();
    for head_dim in (8..=256).step_by(8) {
        let shape = AttentionShape {
            batch: 2,
            heads_q: 4,
            heads_kv: 2,
            seq_len_q: 67,
            seq_len_kv: 93 + head_dim / 8,
            head_dim,
        };
        let causal = head_dim % 16 == 0;
        let layout = if head_dim % 24 == 0 {
            Layout::Bshd
        } else {
            Layout::Bhsd
        };
        let f16_problem = Problem::<f16>::new(shape, causal, None);
        f16_problem.check(&gpu, &f16_problem.options(layout, None));
        let bf16_problem = Problem::<bf16>::new(shape, !causal, None);
        bf16_problem.check(&gpu, &bf16_problem.options(layout, None));
    }
}

pub(crate) fn several_fresh_inputs_at_the_seed_shape() {
    let gpu = gpu();
    for _ in 0..3 {
        let problem = Problem::<f16>::new(AttentionShape::new(4, 8, 512, 64), false, None);
        problem.check(&gpu, &problem.options(Layout::Bhsd, None));
    }
}

pub(crate) fn a_custom_softmax_scale_is_applied() {
    let gpu = gpu();
    for scale in [0.02, 0.5] {
        let problem = Problem::<f16>::new(AttentionShape::new(2, 2, 256, 64), false, Some(scale));
        problem.check(&gpu, &problem.options(Layout::Bhsd, None));
    }
}

pub(crate) fn a_thousand_runs_are_bitwise_identical() {
    let gpu = gpu();
    for causal in [false, true] {
        let problem = Problem::<f16>::new(AttentionShape::new(4, 8, 512, 64), causal, None);
        let options = problem.options(Layout::Bhsd, None);
        let first = problem.run(&gpu, &options).unwrap();
        for run in 1..1000 {
            let again = problem.run(&gpu, &options).unwrap();
            let same = again
                .output
                .iter()
                .zip(&first.output)
                .all(|(a, b)| a.to_bits() == b.to_bits())
                && again
                    .logsumexp
                    .iter()
                    .zip(&first.logsumexp)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "run {run} differs from run 0 (causal = {causal})");
        }
    }
}

pub(crate) fn forward_host_matches_the_device_path() {
    let gpu = gpu();
    let problem = Problem::<f16>::new(AttentionShape::new(2, 4, 256, 64), false, None);
    let options = ForwardOptions {
        softmax_scale: Some(problem.softmax_scale),
        ..Default::default()
    };
    let from_host = gpu
        .forward_host(&problem.q, &problem.k, &problem.v, problem.shape, &options)
        .unwrap();
    let from_device = problem.run(&gpu, &options).unwrap();
    assert!(from_host
        .iter()
        .zip(&from_device.output)
        .all(|(a, b)| a.to_f64().to_bits() == b.to_bits()));
}

pub(crate) fn the_raw_entry_point_matches_the_safe_one() {
    use cust::memory::{CopyDestination, DeviceBuffer};
    use flash_attn::RawTensors;
    let gpu = gpu();
    let problem = Problem::<bf16>::new(AttentionShape::new(2, 4, 300, 128), true, None);
    let options = problem.options(Layout::Bhsd, None);
    let (q, k, v) = (
        DeviceBuffer::from_slice(&problem.q).unwrap(),
        DeviceBuffer::from_slice(&problem.k).unwrap(),
        DeviceBuffer::from_slice(&problem.v).unwrap(),
    );
    let output =
        DeviceBuffer::from_slice(&vec![bf16::NAN; problem.shape.q_elements().unwrap()]).unwrap();
    let tensors = RawTensors {
        q: q.as_device_ptr().as_raw(),
        k: k.as_device_ptr().as_raw(),
        v: v.as_device_ptr().as_raw(),
        o: output.as_device_ptr().as_raw(),
        lse: None,
    };
    // SAFETY: the buffers are dense [B, H, S, D] of the shape, alive until the synchronize
    // below, and the stream is the instance's own (primary context).
    unsafe {
        gpu.forward_raw(
            gpu.stream().as_inner(),
            Dtype::Bf16,
            tensors,
            problem.shape,
            &options,
        )
    }
    .unwrap();
    gpu.synchronize().unwrap();
    let mut raw = vec![bf16::ZERO; problem.shape.q_elements().unwrap()];
    output.copy_to(&mut raw[..]).unwrap();
    let safe = problem.run(&gpu, &options).unwrap();
    assert!(raw
        .iter()
        .zip(&safe.output)
        .all(|(a, b)| a.to_f64().to_bits() == b.to_bits()));
}

pub(crate) fn kernels_load_from_cubins_where_built_and_from_ptx_when_forced() {
    use flash_attn::{KernelSource, LoadOptions, PtxReason, CUBINS};
    let gpu = gpu();
    let options = crate::support::load_options();
    let forced = FlashAttention::with_options(&LoadOptions {
        force_ptx: true,
        ..options
    })
    .unwrap();
    let (major, minor) = gpu.compute_capability();
    let device_arch = format!("sm_{major}{minor}");
    // A forced PTX target (FLASH_ATTN_PTX_TARGET) is the one every kernel loads from.
    if let Some(target) = options.ptx_target {
        assert_eq!(gpu.ptx_target().name, target.name);
    }
    // With `force_ptx` unset, `Forced` means a PTX target other than the device's own.
    let forced_target = matches!(
        options.cubin_for("", (major, minor)),
        Err(PtxReason::Forced)
    );
    let problem = Problem::<f16>::new(AttentionShape::new(2, 4, 300, 64), true, None);
    for kernel in FORWARD_KERNELS
        .iter()
        .filter(|k| k.spec.dtype == Dtype::F16 && k.spec.variant == Variant::Dense)
    {
        let source = gpu.preload(kernel).unwrap();
        let has_cubin = CUBINS
            .iter()
            .any(|cubin| cubin.entry == kernel.entry && cubin.arch == device_arch);
        // Unless the options force another PTX target (FLASH_ATTN_PTX_TARGET), whose PTX then
        // loads instead.
        if forced_target {
            assert_eq!(
                source,
                KernelSource::Ptx(PtxReason::Forced),
                "{}",
                kernel.entry
            );
        } else if has_cubin && options.cubin_for(kernel.entry, (major, minor)).is_ok() {
            assert!(
                matches!(source, KernelSource::Cubin { arch } if arch == device_arch),
                "{}: {source:?}",
                kernel.entry
            );
        }
        assert_eq!(
            forced.preload(kernel).unwrap(),
            KernelSource::Ptx(PtxReason::Forced)
        );
        if kernel.spec.tile.head_dim == 64 {
            let options = problem.options(Layout::Bhsd, Some(kernel));
            problem.check(&gpu, &options);
            problem.check(&forced, &options);
        }
    }
}
