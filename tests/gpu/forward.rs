use flash_attn::{default_kernel, AttentionShape, Error, ForwardOptions, FORWARD_KERNELS};
use half::f16;

use crate::support::{fits, gpu, Problem};

fn shape(batch: usize, heads: usize, seq_len: usize) -> AttentionShape {
    AttentionShape {
        batch,
        heads,
        seq_len,
        head_dim: 64,
    }
}

/// Runs every kernel that fits each shape; kernels that don't fit must say so.
fn check_every_kernel(shapes: &[AttentionShape]) {
    let Some(gpu) = gpu() else { return };
    for &shape in shapes {
        let problem = Problem::new(shape, None);
        for kernel in FORWARD_KERNELS {
            if fits(kernel, shape) {
                problem.check(&gpu, kernel);
            } else {
                let error = problem.run(&gpu, kernel).unwrap_err();
                assert!(
                    matches!(error, Error::SeqLenNotTileMultiple { .. }),
                    "{error}"
                );
            }
        }
    }
}

#[test]
fn every_kernel_on_a_small_problem() {
    check_every_kernel(&[shape(1, 2, 256)]);
}

#[test]
fn every_kernel_at_the_seed_shape() {
    check_every_kernel(&[shape(4, 8, 512)]);
}

#[test]
fn every_kernel_for_sequence_lengths_128_to_4096() {
    check_every_kernel(&[
        shape(1, 3, 128),
        shape(2, 2, 192),
        shape(1, 2, 384),
        shape(1, 2, 1024),
        shape(1, 2, 2048),
        shape(1, 1, 4096),
    ]);
}

#[test]
fn every_kernel_for_batch_and_head_variations() {
    check_every_kernel(&[
        shape(1, 1, 512),
        shape(3, 5, 256),
        shape(16, 16, 128),
        shape(2, 40, 128),
    ]);
}

#[test]
fn several_fresh_inputs_at_the_seed_shape() {
    let Some(gpu) = gpu() else { return };
    for _ in 0..3 {
        Problem::new(shape(4, 8, 512), None).check(&gpu, default_kernel());
    }
}

#[test]
fn a_custom_softmax_scale_is_applied() {
    let Some(gpu) = gpu() else { return };
    for scale in [0.02, 0.5] {
        Problem::new(shape(2, 2, 256), Some(scale)).check(&gpu, default_kernel());
    }
}

#[test]
fn repeated_runs_are_bitwise_identical() {
    let Some(gpu) = gpu() else { return };
    let problem = Problem::new(shape(4, 8, 512), None);
    let first = problem.run(&gpu, default_kernel()).unwrap();
    for _ in 0..20 {
        assert!(
            problem.run(&gpu, default_kernel()).unwrap() == first,
            "outputs differ between runs"
        );
    }
}

#[test]
fn forward_host_matches_the_device_path() {
    let Some(gpu) = gpu() else { return };
    let problem = Problem::new(shape(2, 4, 256), None);
    let from_host = gpu
        .forward_host(
            &problem.q,
            &problem.k,
            &problem.v,
            problem.shape,
            &ForwardOptions::default(),
        )
        .unwrap();
    let from_device = problem.run(&gpu, default_kernel()).unwrap();
    assert!(from_host
        .iter()
        .zip(&from_device)
        .all(|(a, b): (&f16, &f16)| a.to_bits() == b.to_bits()));
}
