//! Problem validation without a GPU, through `supports`: one test per error it can return.

use flash_attn::{
    default_kernel, dispatch_kernel, kernel_by_name, modified_kernel, padded_head_dim, plan,
    plan_on, supports, AttentionShape, Dtype, Error, ForwardKernel, ForwardOptions, ForwardStrides,
    Layout, TensorStrides, Variant, FORWARD_KERNELS, SUPPORTED_HEAD_DIMS,
};

use crate::H100_SM_COUNT;

const SHAPE: AttentionShape = AttentionShape {
    batch: 2,
    heads_q: 8,
    heads_kv: 2,
    seq_len_q: 77,
    seq_len_kv: 300,
    head_dim: 64,
};

fn check(shape: AttentionShape, options: ForwardOptions) -> Result<&'static str, Error> {
    supports(Dtype::F16, &shape, &options, H100_SM_COUNT).map(|kernel| kernel.entry)
}

#[test]
fn general_problems_are_supported() {
    for (seq_len_q, seq_len_kv) in [(1, 1), (1, 4096), (4097, 3), (239, 1)] {
        for head_dim in [8, 64, 80, 128, 200, 256] {
            for causal in [false, true] {
                for layout in [Layout::Bhsd, Layout::Bshd] {
                    let shape = AttentionShape {
                        seq_len_q,
                        seq_len_kv,
                        head_dim,
                        ..SHAPE
                    };
                    let options = ForwardOptions {
                        causal,
                        layout,
                        ..Default::default()
                    };
                    for dtype in [Dtype::F16, Dtype::Bf16] {
                        let kernel = supports(dtype, &shape, &options, H100_SM_COUNT).unwrap();
                        // A head dim of its own: the dispatch table's kernel; a padded one:
                        // the modified kernel of the head dim it pads to.
                        let dispatched = if padded_head_dim(head_dim) == Some(head_dim) {
                            dispatch_kernel(dtype, &shape, causal, H100_SM_COUNT).unwrap()
                        } else {
                            modified_kernel(dtype, &shape, causal, H100_SM_COUNT).unwrap()
                        };
                        assert_eq!(kernel, dispatched);
                    }
                }
            }
        }
    }
}

#[test]
fn zero_sized_dimensions_are_rejected() {
    for (shape, dimension) in [
        (AttentionShape { batch: 0, ..SHAPE }, "batch"),
        (
            AttentionShape {
                heads_q: 0,
                ..SHAPE
            },
            "heads_q",
        ),
        (
            AttentionShape {
                heads_kv: 0,
                ..SHAPE
            },
            "heads_kv",
        ),
        (
            AttentionShape {
                seq_len_q: 0,
                ..SHAPE
            },
            "seq_len_q",
        ),
        (
            AttentionShape {
                seq_len_kv: 0,
                ..SHAPE
            },
            "seq_len_kv",
        ),
        (
            AttentionShape {
                head_dim: 0,
                ..SHAPE
            },
            "head_dim",
        ),
    ] {
        assert_eq!(
            check(shape, ForwardOptions::default()),
            Err(Error::ZeroSizedDimension { dimension })
        );
    }
}

#[test]
fn a_head_dim_not_a_multiple_of_8_up_to_256_is_rejected() {
    for head_dim in [4, 12, 100, 257, 264, 512] {
        let error = check(
            AttentionShape { head_dim, ..SHAPE },
            ForwardOptions::default(),
        )
        .unwrap_err();
        assert_eq!(error, Error::InvalidHeadDim { head_dim });
        assert!(
            error.to_string().contains("multiple of 8 from 8 to 256"),
            "{error}"
        );
    }
    assert_eq!(
        check(
            AttentionShape {
                head_dim: 0,
                ..SHAPE
            },
            ForwardOptions::default(),
        ),
        Err(Error::ZeroSizedDimension {
            dimension: "head_dim"
        })
    );
}

#[test]
fn every_multiple_of_8_up_to_256_runs_on_the_next_kernel_head_dim() {
    for head_dim in (8..=256).step_by(8) {
        let shape = AttentionShape { head_dim, ..SHAPE };
        let plan = plan(
            Dtype::F16,
            &shape,
            &ForwardOptions::default(),
            H100_SM_COUNT,
        )
        .unwrap();
        let kernel_head_dim = plan.kernel().spec.tile.head_dim;
        // Its own kernel head dim, else the next one whose modified kernels pad (all but 64
        // and 128, whose modified tiles spilled with the padding).
        let expected = *SUPPORTED_HEAD_DIMS
            .iter()
            .find(|&&kernel| {
                kernel == head_dim || (kernel > head_dim && kernel != 64 && kernel != 128)
            })
            .unwrap();
        assert_eq!(kernel_head_dim, expected, "head dim {head_dim}");
        // A head dim of its own runs the dense kernels; a padded one the modified kernels, the
        // only ones that pad (the others pay nothing for it).
        let variant = if expected == head_dim {
            Variant::Dense
        } else {
            Variant::Modified
        };
        assert_eq!(plan.kernel().spec.variant, variant, "head dim {head_dim}");
        assert_eq!(
            padded_head_dim(head_dim),
            Some(expected),
            "head dim {head_dim}"
        );
        // The kernel reads and writes the problem's columns only: the params carry its head
        // dim, and the buffers need no more than the problem's rows.
        assert_eq!(plan.params().head_dim as usize, head_dim);
        let elements = shape.batch * shape.heads_q * shape.seq_len_q * head_dim;
        assert_eq!(plan.required().q as usize, elements, "head dim {head_dim}");
    }
}

#[test]
fn a_gqa_ratio_that_is_not_whole_is_rejected() {
    let error = check(
        AttentionShape {
            heads_kv: 3,
            ..SHAPE
        },
        ForwardOptions::default(),
    )
    .unwrap_err();
    assert_eq!(
        error,
        Error::InvalidGqaRatio {
            heads_q: 8,
            heads_kv: 3
        }
    );
}

#[test]
fn a_kernel_of_another_dtype_or_head_dim_is_rejected() {
    let bf16_kernel = default_kernel(Dtype::Bf16, 64).unwrap();
    let options = ForwardOptions {
        kernel: Some(bf16_kernel),
        ..Default::default()
    };
    assert_eq!(
        check(SHAPE, options),
        Err(Error::KernelDtypeMismatch {
            kernel: bf16_kernel.entry,
            dtype: Dtype::F16
        })
    );
    let d128 = default_kernel(Dtype::F16, 128).unwrap();
    let options = ForwardOptions {
        kernel: Some(d128),
        ..Default::default()
    };
    // A dense kernel runs its own head dim only (the modified ones pad).
    assert_eq!(
        check(SHAPE, options),
        Err(Error::KernelHeadDimMismatch {
            kernel: d128.entry,
            kernel_head_dim: 128,
            head_dim: 64
        })
    );
    let d32 = default_kernel(Dtype::F16, 32).unwrap();
    let options = ForwardOptions {
        kernel: Some(d32),
        ..Default::default()
    };
    let error = check(SHAPE, options).unwrap_err();
    assert_eq!(
        error,
        Error::KernelHeadDimMismatch {
            kernel: d32.entry,
            kernel_head_dim: 32,
            head_dim: 64
        }
    );
    // The message says what does not match, not which head dims exist.
    let message = error.to_string();
    assert!(
        message.contains("compiled for head dim 32") && message.contains("head dim 64"),
        "{message}"
    );
}

#[test]
fn problems_too_large_for_one_launch_are_rejected() {
    let error = check(
        AttentionShape {
            batch: 70_000,
            ..SHAPE
        },
        ForwardOptions::default(),
    )
    .unwrap_err();
    assert_eq!(
        error,
        Error::ProblemTooLarge {
            dimension: "batch",
            value: 70_000,
            limit: 65_535
        }
    );
    let error = check(
        AttentionShape {
            heads_q: 131_072,
            heads_kv: 2,
            ..SHAPE
        },
        ForwardOptions::default(),
    );
    assert!(matches!(
        error,
        Err(Error::ProblemTooLarge {
            dimension: "heads_q",
            ..
        })
    ));
    let error = check(
        AttentionShape {
            seq_len_kv: (1 << 30) + 1,
            ..SHAPE
        },
        ForwardOptions::default(),
    );
    assert!(matches!(
        error,
        Err(Error::ProblemTooLarge {
            dimension: "seq_len_kv",
            ..
        })
    ));
}

#[test]
fn an_invalid_softmax_scale_is_rejected() {
    for scale in [0.0, -1.0, f32::NAN, f32::INFINITY] {
        let options = ForwardOptions {
            softmax_scale: Some(scale),
            ..Default::default()
        };
        assert!(matches!(
            check(SHAPE, options),
            Err(Error::InvalidSoftmaxScale { .. })
        ));
    }
}

fn with_strides(q: TensorStrides, o: TensorStrides) -> ForwardOptions {
    let kv = Layout::Bhsd.strides(2, 300, 64).unwrap();
    ForwardOptions {
        strides: Some(ForwardStrides { q, k: kv, v: kv, o }),
        ..Default::default()
    }
}

#[test]
fn strides_that_misalign_rows_are_rejected() {
    let dense = Layout::Bhsd.strides(8, 77, 64).unwrap();
    let odd = TensorStrides { seq: 68, ..dense };
    assert_eq!(
        check(SHAPE, with_strides(odd, dense)),
        Err(Error::MisalignedStride {
            tensor: "q",
            stride: "seq",
            value: 68
        })
    );
}

#[test]
fn strides_past_the_tensor_maps_bound_are_rejected_for_the_tma_kernels() {
    // The D=64 8-warp sm90 kernel and the D=128 warp-specialised one copy Q, K and V by TMA;
    // their tensor maps take byte strides below 2^40, so an element stride from 2^39 on is
    // refused, where its dimension has more than one element, and any stride of a dimension of
    // one element is taken.
    let limit = (1u64 << 39) - 1;
    let too_far = (limit + 1).next_multiple_of(8);
    for (name, head_dim) in [
        ("flash_fwd_f16_d64_m128_n64_w8_s2_sm90a", 64),
        ("flash_fwd_f16_d128_m128_n128_w12_s2_sm90a", 128),
    ] {
        let kernel = kernel_by_name(name).unwrap();
        assert!(kernel.spec.copies_by_tma());
        let shape = AttentionShape::new(1, 2, 100, head_dim);
        let dense = Layout::Bhsd.strides(2, 100, head_dim).unwrap();
        let plan_with = |q: TensorStrides, k: TensorStrides, v: TensorStrides| {
            let options = ForwardOptions {
                kernel: Some(kernel),
                strides: Some(ForwardStrides { q, k, v, o: dense }),
                ..Default::default()
            };
            plan_on(Dtype::F16, &shape, &options, H100_SM_COUNT, (9, 0)).map(|_| ())
        };
        let far = |dimension: &str| match dimension {
            "head" => TensorStrides {
                head: too_far,
                ..dense
            },
            "seq" => TensorStrides {
                seq: too_far,
                ..dense
            },
            _ => TensorStrides {
                batch: too_far,
                ..dense
            },
        };
        for (tensor, dimension) in [("q", "head"), ("q", "seq"), ("k", "head"), ("v", "seq")] {
            let strides = |of: &str| if of == tensor { far(dimension) } else { dense };
            assert_eq!(
                plan_with(strides("q"), strides("k"), strides("v")),
                Err(Error::ProblemTooLarge {
                    dimension: match (tensor, dimension) {
                        ("q", "head") => "q head stride",
                        ("q", _) => "q seq stride",
                        ("k", _) => "k head stride",
                        _ => "v seq stride",
                    },
                    value: too_far as usize,
                    limit: limit as usize,
                }),
                "{name}: {tensor} {dimension} stride"
            );
        }
        // The batch has one element: its stride is not in the maps.
        assert_eq!(
            plan_with(far("batch"), far("batch"), dense),
            Ok(()),
            "{name}"
        );
    }
    let dense = Layout::Bhsd.strides(2, 100, 64).unwrap();
    let shape = AttentionShape::new(1, 2, 100, 64);
    // The same strides on a kernel that copies with `cp.async` are taken.
    let options = ForwardOptions {
        kernel: Some(kernel_by_name("flash_fwd_f16_d64_m64_n64_w4_s3").unwrap()),
        strides: Some(ForwardStrides {
            q: dense,
            k: TensorStrides {
                head: too_far,
                ..dense
            },
            v: dense,
            o: dense,
        }),
        ..Default::default()
    };
    assert!(plan_on(Dtype::F16, &shape, &options, H100_SM_COUNT, (9, 0)).is_ok());
}

#[test]
fn output_strides_that_overlap_rows_are_rejected() {
    let dense = Layout::Bhsd.strides(8, 77, 64).unwrap();
    // Rows 32 elements apart overlap 64-element rows; heads 0 apart write the same rows.
    for o in [
        TensorStrides { seq: 32, ..dense },
        TensorStrides { head: 0, ..dense },
    ] {
        assert_eq!(
            check(SHAPE, with_strides(dense, o)),
            Err(Error::OverlappingOutput { strides: o })
        );
    }
    // Inputs may overlap (a broadcast over heads, say); padded outputs are fine.
    let broadcast = TensorStrides { head: 0, ..dense };
    let padded = TensorStrides {
        batch: 8 * 80 * 72,
        head: 80 * 72,
        seq: 72,
    };
    assert!(check(SHAPE, with_strides(broadcast, padded)).is_ok());
}

#[test]
fn layouts_give_the_strides_of_their_dimension_order() {
    assert_eq!(
        Layout::Bhsd.strides(8, 77, 64).unwrap(),
        TensorStrides {
            batch: 8 * 77 * 64,
            head: 77 * 64,
            seq: 64
        }
    );
    assert_eq!(
        Layout::Bshd.strides(8, 77, 64).unwrap(),
        TensorStrides {
            batch: 77 * 8 * 64,
            head: 64,
            seq: 8 * 64
        }
    );
}

#[test]
fn flops_are_halved_for_causal() {
    let shape = AttentionShape::new(4, 8, 512, 64);
    assert_eq!(shape.flops(false), 4.0 * 32.0 * 512.0 * 512.0 * 64.0);
    assert_eq!(shape.flops(true), shape.flops(false) / 2.0);
}

#[test]
fn a_changed_copy_of_a_compiled_kernel_is_rejected() {
    // Launched, it would run the compiled kernel's code with the other tile's threads.
    let compiled = default_kernel(Dtype::F16, 64).unwrap();
    let mut copy = *compiled;
    copy.spec.tile = FORWARD_KERNELS[1].spec.tile;
    assert_ne!(copy.spec.tile, compiled.spec.tile);
    let changed: &'static ForwardKernel = Box::leak(Box::new(copy));
    let options = |kernel| ForwardOptions {
        kernel: Some(kernel),
        ..Default::default()
    };
    assert_eq!(check(SHAPE, options(compiled)), Ok(compiled.entry));
    assert_eq!(
        check(SHAPE, options(changed)),
        Err(Error::UnknownKernel {
            name: compiled.entry.into()
        })
    );
}

#[test]
fn unknown_kernel_names_are_an_error() {
    assert_eq!(
        kernel_by_name("flash_fwd_nope"),
        Err(Error::UnknownKernel {
            name: "flash_fwd_nope".into()
        })
    );
}
