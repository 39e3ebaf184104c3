//! The validation that needs device buffers: sizes and alignment. (Everything that needs no
//! buffer is covered without a GPU by `tests/cpu/problem.rs`, through `supports`.)

use cust::memory::DeviceBuffer;
use flash_attn::{AttentionShape, Error, FlashAttention, ForwardOptions};
use half::f16;

use crate::support::gpu;

const SHAPE: AttentionShape = AttentionShape {
    batch: 2,
    heads_q: 4,
    heads_kv: 2,
    seq_len_q: 100,
    seq_len_kv: 70,
    head_dim: 64,
};

fn buffer(elements: usize) -> DeviceBuffer<f16> {
    DeviceBuffer::from_slice(&vec![f16::from_f32(0.5); elements]).unwrap()
}

#[test]
fn a_short_input_is_rejected() {
    let Some(gpu) = gpu() else { return };
    let (q, v) = (buffer(SHAPE.q_elements()), buffer(SHAPE.kv_elements()));
    let k = buffer(SHAPE.kv_elements() - 8);
    let mut output = buffer(SHAPE.q_elements());
    let error = gpu
        .forward(
            &q,
            &k,
            &v,
            &mut output,
            None,
            SHAPE,
            &ForwardOptions::default(),
        )
        .unwrap_err();
    assert_eq!(
        error,
        Error::BufferTooSmall {
            tensor: "k",
            required: SHAPE.kv_elements() as u64,
            actual: SHAPE.kv_elements() - 8
        }
    );
}

#[test]
fn a_too_small_output_is_rejected() {
    let Some(gpu) = gpu() else { return };
    let (q, k, v) = (
        buffer(SHAPE.q_elements()),
        buffer(SHAPE.kv_elements()),
        buffer(SHAPE.kv_elements()),
    );
    let mut output = buffer(SHAPE.q_elements() - 1);
    let error = gpu
        .forward(
            &q,
            &k,
            &v,
            &mut output,
            None,
            SHAPE,
            &ForwardOptions::default(),
        )
        .unwrap_err();
    assert!(
        matches!(error, Error::BufferTooSmall { tensor: "o", .. }),
        "{error}"
    );
}

#[test]
fn a_too_small_logsumexp_is_rejected() {
    let Some(gpu) = gpu() else { return };
    let (q, k, v) = (
        buffer(SHAPE.q_elements()),
        buffer(SHAPE.kv_elements()),
        buffer(SHAPE.kv_elements()),
    );
    let mut output = buffer(SHAPE.q_elements());
    let mut lse = DeviceBuffer::from_slice(&vec![0f32; SHAPE.lse_elements() - 1]).unwrap();
    let error = gpu
        .forward(
            &q,
            &k,
            &v,
            &mut output,
            Some(&mut lse),
            SHAPE,
            &ForwardOptions::default(),
        )
        .unwrap_err();
    assert!(
        matches!(error, Error::BufferTooSmall { tensor: "lse", .. }),
        "{error}"
    );
}

#[test]
fn a_misaligned_buffer_is_rejected() {
    let Some(gpu) = gpu() else { return };
    let (q, k) = (buffer(SHAPE.q_elements()), buffer(SHAPE.kv_elements()));
    let v_storage = buffer(SHAPE.kv_elements() + 1);
    let v = v_storage.index(1..);
    let mut output = buffer(SHAPE.q_elements());
    let error = gpu
        .forward(
            &q,
            &k,
            &v,
            &mut output,
            None,
            SHAPE,
            &ForwardOptions::default(),
        )
        .unwrap_err();
    assert!(
        matches!(error, Error::MisalignedBuffer { tensor: "v", .. }),
        "{error}"
    );
}

#[test]
fn problem_errors_surface_through_forward_too() {
    let Some(gpu) = gpu() else { return };
    let (q, k, v) = (
        buffer(SHAPE.q_elements()),
        buffer(SHAPE.kv_elements()),
        buffer(SHAPE.kv_elements()),
    );
    let mut output = buffer(SHAPE.q_elements());
    let bad = AttentionShape {
        heads_kv: 3,
        ..SHAPE
    };
    let error = gpu
        .forward(
            &q,
            &k,
            &v,
            &mut output,
            None,
            bad,
            &ForwardOptions::default(),
        )
        .unwrap_err();
    assert_eq!(
        error,
        Error::InvalidGqaRatio {
            heads_q: 4,
            heads_kv: 3
        }
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
