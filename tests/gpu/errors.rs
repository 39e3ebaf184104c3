//! The validation that needs device buffers: sizes and alignment. (Everything that needs no
//! buffer is covered without a GPU by `tests/cpu/problem.rs`, through `supports`.)

use cust::memory::{DeviceBuffer, DeviceSlice};
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

/// Dense buffers for `SHAPE`, each shorter by its entry of `shrink` (0: the right length).
struct Buffers {
    q: DeviceBuffer<f16>,
    k: DeviceBuffer<f16>,
    v: DeviceBuffer<f16>,
    o: DeviceBuffer<f16>,
}

impl Buffers {
    fn new(shrink: [usize; 4]) -> Self {
        let [q, k, v, o] = shrink;
        Self {
            q: buffer(SHAPE.q_elements().unwrap() - q),
            k: buffer(SHAPE.kv_elements().unwrap() - k),
            v: buffer(SHAPE.kv_elements().unwrap() - v),
            o: buffer(SHAPE.q_elements().unwrap() - o),
        }
    }

    fn forward(
        &mut self,
        gpu: &FlashAttention,
        shape: AttentionShape,
        lse: Option<&mut DeviceSlice<f32>>,
    ) -> Error {
        gpu.forward(
            &self.q,
            &self.k,
            &self.v,
            &mut self.o,
            lse,
            shape,
            &ForwardOptions::default(),
        )
        .unwrap_err()
    }
}

pub(crate) fn a_short_input_is_rejected() {
    let gpu = gpu();
    let error = Buffers::new([0, 8, 0, 0]).forward(&gpu, SHAPE, None);
    let (required, actual) = (
        SHAPE.kv_elements().unwrap() as u64,
        SHAPE.kv_elements().unwrap() - 8,
    );
    assert_eq!(
        error,
        Error::BufferTooSmall {
            tensor: "k",
            required,
            actual
        }
    );
}

pub(crate) fn a_too_small_output_is_rejected() {
    let gpu = gpu();
    let error = Buffers::new([0, 0, 0, 1]).forward(&gpu, SHAPE, None);
    assert!(
        matches!(error, Error::BufferTooSmall { tensor: "o", .. }),
        "{error}"
    );
}

pub(crate) fn a_too_small_logsumexp_is_rejected() {
    let gpu = gpu();
    let mut lse = DeviceBuffer::from_slice(&vec![0f32; SHAPE.lse_elements().unwrap() - 1]).unwrap();
    let error = Buffers::new([0; 4]).forward(&gpu, SHAPE, Some(&mut lse));
    assert!(
        matches!(error, Error::BufferTooSmall { tensor: "lse", .. }),
        "{error}"
    );
}

pub(crate) fn a_misaligned_buffer_is_rejected() {
    let gpu = gpu();
    let buffers = Buffers::new([0; 4]);
    let v_storage = buffer(SHAPE.kv_elements().unwrap() + 1);
    let mut output = buffer(SHAPE.q_elements().unwrap());
    let error = gpu
        .forward(
            &buffers.q,
            &buffers.k,
            &v_storage.index(1..),
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

pub(crate) fn problem_errors_surface_through_forward_too() {
    let gpu = gpu();
    let error = Buffers::new([0; 4]).forward(
        &gpu,
        AttentionShape {
            heads_kv: 3,
            ..SHAPE
        },
        None,
    );
    assert_eq!(
        error,
        Error::InvalidGqaRatio {
            heads_q: 4,
            heads_kv: 3
        }
    );
}

pub(crate) fn without_a_gpu_construction_is_an_error_not_a_panic() {
    // On a machine with a GPU this is a plain success; without one it must be `NoGpu`.
    match FlashAttention::new() {
        Ok(_) => {}
        Err(error) => assert!(
            matches!(error, Error::NoGpu(_)),
            "unexpected error: {error}"
        ),
    }
}
