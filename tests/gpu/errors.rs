//! Each invalid call returns its own error and launches nothing.

use cust::memory::DeviceBuffer;
use flash_attn::{
    default_kernel, AttentionShape, Error, FlashAttention, ForwardOptions, SUPPORTED_HEAD_DIMS,
};
use half::f16;

use crate::support::gpu;

const SHAPE: AttentionShape = AttentionShape {
    batch: 2,
    heads: 2,
    seq_len: 128,
    head_dim: 64,
};

fn buffer(elements: usize) -> DeviceBuffer<f16> {
    DeviceBuffer::from_slice(&vec![f16::from_f32(0.5); elements]).unwrap()
}

fn forward_with(
    gpu: &FlashAttention,
    shape: AttentionShape,
    options: &ForwardOptions,
) -> Result<(), Error> {
    let (q, k, v) = (
        buffer(SHAPE.elements()),
        buffer(SHAPE.elements()),
        buffer(SHAPE.elements()),
    );
    let mut output = buffer(SHAPE.elements());
    gpu.forward(&q, &k, &v, &mut output, shape, options)
}

#[test]
fn a_short_buffer_is_rejected() {
    let Some(gpu) = gpu() else { return };
    let (q, v) = (buffer(SHAPE.elements()), buffer(SHAPE.elements()));
    let k = buffer(SHAPE.elements() - 8);
    let mut output = buffer(SHAPE.elements());
    let error = gpu
        .forward(&q, &k, &v, &mut output, SHAPE, &ForwardOptions::default())
        .unwrap_err();
    assert_eq!(
        error,
        Error::BufferLength {
            tensor: "k",
            expected: SHAPE.elements(),
            actual: SHAPE.elements() - 8
        }
    );
}

#[test]
fn a_too_small_output_is_rejected() {
    let Some(gpu) = gpu() else { return };
    let (q, k, v) = (
        buffer(SHAPE.elements()),
        buffer(SHAPE.elements()),
        buffer(SHAPE.elements()),
    );
    let mut output = buffer(SHAPE.elements() / 2);
    let error = gpu
        .forward(&q, &k, &v, &mut output, SHAPE, &ForwardOptions::default())
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::BufferLength {
                tensor: "output",
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn a_misaligned_buffer_is_rejected() {
    let Some(gpu) = gpu() else { return };
    let (q, k) = (buffer(SHAPE.elements()), buffer(SHAPE.elements()));
    let v_storage = buffer(SHAPE.elements() + 1);
    let v = v_storage.index(1..);
    let mut output = buffer(SHAPE.elements());
    let error = gpu
        .forward(&q, &k, &v, &mut output, SHAPE, &ForwardOptions::default())
        .unwrap_err();
    assert!(
        matches!(error, Error::MisalignedBuffer { tensor: "v", .. }),
        "{error}"
    );
}

#[test]
fn an_unsupported_head_dim_lists_the_supported_ones() {
    let Some(gpu) = gpu() else { return };
    let shape = AttentionShape {
        head_dim: 128,
        seq_len: 64,
        ..SHAPE
    };
    let error = forward_with(&gpu, shape, &ForwardOptions::default()).unwrap_err();
    assert_eq!(
        error,
        Error::UnsupportedHeadDim {
            head_dim: 128,
            supported: SUPPORTED_HEAD_DIMS
        }
    );
    assert!(error.to_string().contains("[64]"));
}

#[test]
fn zero_sized_dimensions_are_rejected() {
    let Some(gpu) = gpu() else { return };
    for (shape, dimension) in [
        (AttentionShape { batch: 0, ..SHAPE }, "batch"),
        (AttentionShape { heads: 0, ..SHAPE }, "heads"),
        (
            AttentionShape {
                seq_len: 0,
                ..SHAPE
            },
            "seq_len",
        ),
        (
            AttentionShape {
                head_dim: 0,
                ..SHAPE
            },
            "head_dim",
        ),
    ] {
        let error = forward_with(&gpu, shape, &ForwardOptions::default()).unwrap_err();
        assert_eq!(error, Error::ZeroSizedDimension { dimension });
    }
}

#[test]
fn a_sequence_length_off_the_tile_is_rejected() {
    let Some(gpu) = gpu() else { return };
    let shape = AttentionShape {
        seq_len: 100,
        ..SHAPE
    };
    let error = forward_with(&gpu, shape, &ForwardOptions::default()).unwrap_err();
    let multiple = default_kernel().tile.seq_len_multiple();
    assert_eq!(
        error,
        Error::SeqLenNotTileMultiple {
            seq_len: 100,
            multiple
        }
    );
}

#[test]
fn an_invalid_softmax_scale_is_rejected() {
    let Some(gpu) = gpu() else { return };
    for scale in [0.0, -1.0, f32::NAN, f32::INFINITY] {
        let options = ForwardOptions {
            softmax_scale: Some(scale),
            ..ForwardOptions::default()
        };
        let error = forward_with(&gpu, SHAPE, &options).unwrap_err();
        assert!(
            matches!(error, Error::InvalidSoftmaxScale { .. }),
            "{error}"
        );
    }
}

#[test]
fn too_many_heads_for_one_grid_are_rejected() {
    let Some(gpu) = gpu() else { return };
    let shape = AttentionShape {
        batch: 1024,
        heads: 128,
        ..SHAPE
    };
    let error = forward_with(&gpu, shape, &ForwardOptions::default()).unwrap_err();
    assert!(
        matches!(
            error,
            Error::ProblemTooLarge {
                dimension: "batch * heads",
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn without_a_gpu_construction_is_an_error_not_a_panic() {
    // On a machine with a GPU this is a plain success; without one it must be `NoGpu`.
    match FlashAttention::new() {
        Ok(_) => {}
        Err(error) => assert!(
            matches!(error, Error::NoGpu(_)),
            "unexpected error: {error}"
        ),
    }
}
