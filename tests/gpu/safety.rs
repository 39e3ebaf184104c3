//! The safety guarantees that need a GPU: launches at the largest batch and head counts the
//! host accepts, 64-bit offsets past 2^32 elements, the stream ordering of `forward_host` and
//! of cust's synchronous copies around `forward`, and concurrent calls from several threads.
//! (`tests/cpu/safety.rs` checks the address arithmetic of every accepted launch without a GPU.)

use std::sync::Barrier;

use cust::context::{Context, CurrentContext};
use cust::device::Device;
use cust::memory::{CopyDestination, DeviceBuffer, LockedBuffer};
use flash_attn::reference::{error_stats, random_normal, within_tolerance};
use flash_attn::{
    AttentionShape, Dtype, Error, FlashAttention, ForwardOptions, ForwardStrides, Layout,
    TensorStrides,
};
use half::f16;

use crate::support::{fresh_seed, gpu, Problem};

/// A launch at the edge of what the host accepts along `dimension`: correct, causal and not,
/// and one more of that dimension is rejected before anything is launched. The sequences are
/// short (tails of one key block) because the CPU reference runs every one of the 65,535
/// (batch, head) slices, and the sanitizers every one of the 65,535 blocks.
fn check_at_the_limit(shape: AttentionShape, one_more: AttentionShape, dimension: &str) {
    let gpu = gpu();
    for causal in [false, true] {
        let problem = Problem::<f16>::new(shape, causal, None);
        problem.check(&gpu, &problem.options(Layout::Bhsd, None));
    }
    let error = flash_attn::supports(Dtype::F16, &one_more, &ForwardOptions::default(), 132);
    assert!(
        matches!(error, Err(Error::ProblemTooLarge { dimension: d, .. }) if d == dimension),
        "{error:?}"
    );
}

/// Grid z at its limit: 65,535 batches.
pub(crate) fn the_largest_batch_the_host_accepts_is_correct() {
    let shape = AttentionShape {
        batch: 65_535,
        heads_q: 1,
        heads_kv: 1,
        seq_len_q: 3,
        seq_len_kv: 17,
        head_dim: 64,
    };
    let one_more = AttentionShape {
        batch: 65_536,
        ..shape
    };
    check_at_the_limit(shape, one_more, "batch");
}

/// Grid y at its limit: 65,535 query heads, in GQA groups of 5 (65,535 = 5 x 13,107).
pub(crate) fn the_most_query_heads_the_host_accepts_are_correct() {
    let shape = AttentionShape {
        batch: 1,
        heads_q: 65_535,
        heads_kv: 13_107,
        seq_len_q: 5,
        seq_len_kv: 9,
        head_dim: 128,
    };
    let one_more = AttentionShape {
        heads_q: 65_540,
        heads_kv: 13_108,
        ..shape
    };
    check_at_the_limit(shape, one_more, "heads_q");
}

/// Q and O whose second batch starts 2^32 + 64 elements (over 8 GiB) after the first: the
/// kernel's 64-bit offsets reach the right rows, and nothing between is touched.
pub(crate) fn offsets_past_two_to_the_32_elements_reach_the_right_rows() {
    let gpu = gpu();
    let shape = AttentionShape {
        batch: 2,
        heads_q: 2,
        heads_kv: 1,
        seq_len_q: 77,
        seq_len_kv: 129,
        head_dim: 64,
    };
    let problem = Problem::<f16>::new(shape, true, None);
    let per_batch = 2 * 77 * 64;
    let far = (1usize << 32) + 64;
    let strides = TensorStrides {
        batch: far as u64,
        head: 77 * 64,
        seq: 64,
    };
    let kv = Layout::Bhsd.strides(1, 129, 64).unwrap();
    let options = ForwardOptions {
        strides: Some(ForwardStrides {
            q: strides,
            k: kv,
            v: kv,
            o: strides,
        }),
        ..problem.options(Layout::Bhsd, None)
    };
    let length = far + per_batch;
    // SAFETY (of the test): only the rows written below are read, by the kernel and by us.
    let q = unsafe { DeviceBuffer::<f16>::uninitialized(length) }.unwrap();
    let mut o = unsafe { DeviceBuffer::<f16>::uninitialized(length) }.unwrap();
    let (k, v) = (
        DeviceBuffer::from_slice(&problem.k).unwrap(),
        DeviceBuffer::from_slice(&problem.v).unwrap(),
    );
    let poison = vec![f16::NAN; per_batch];
    for (batch, start) in [(0, 0), (1, far)] {
        let rows = start..start + per_batch;
        q.index(rows.clone())
            .copy_from(&problem.q[batch * per_batch..(batch + 1) * per_batch])
            .unwrap();
        o.index(rows).copy_from(&poison).unwrap();
    }
    // A buffer one element short of the far batch's last row is rejected.
    let short = unsafe { DeviceBuffer::<f16>::uninitialized(length - 1) }.unwrap();
    assert!(matches!(
        gpu.forward(&short, &k, &v, &mut o, None, shape, &options),
        Err(Error::BufferTooSmall { tensor: "q", .. })
    ));
    gpu.forward(&q, &k, &v, &mut o, None, shape, &options)
        .unwrap();
    gpu.synchronize().unwrap();
    let mut output = Vec::with_capacity(2 * per_batch);
    for start in [0, far] {
        let mut rows = vec![f16::ZERO; per_batch];
        o.index(start..start + per_batch)
            .copy_to(&mut rows)
            .unwrap();
        output.extend(rows.iter().map(|x| x.to_f64()));
    }
    let ours = error_stats(output, &problem.reference.output);
    assert!(
        within_tolerance(&ours, &problem.plain_error),
        "ours {ours:?}, plain {:?}, seed {}",
        problem.plain_error,
        problem.seed
    );
}

/// Fills the legacy default stream with a copy of `bytes` (about 0.4 ms per GiB on an H100): an
/// upload enqueued there after it lands late, so a kernel that did not wait for the upload would
/// read the old bytes.
fn occupy_legacy_stream(source: &DeviceBuffer<u8>, target: &mut DeviceBuffer<u8>) {
    // SAFETY: both buffers hold `len` bytes and live until the context synchronises (the test
    // reads results only after `synchronize`, and dropping a buffer waits for the device).
    let result = unsafe {
        cust::sys::cuMemcpyDtoDAsync_v2(
            target.as_device_ptr().as_raw(),
            source.as_device_ptr().as_raw(),
            source.len(),
            std::ptr::null_mut(),
        )
    };
    assert_eq!(result, cust::sys::CUresult::CUDA_SUCCESS);
}

fn bits(values: &[f16]) -> Vec<u16> {
    values.iter().map(|x| x.to_bits()).collect()
}

/// `forward_host` orders its uploads, kernel and download on its own stream, and the blocking
/// instance stream orders cust's synchronous copies before and after `forward`, while other work
/// keeps the legacy default stream busy: each way gives the bits of a fully synchronised run,
/// with pageable and page-locked inputs, on fresh inputs each round.
pub(crate) fn uploads_kernels_and_downloads_are_ordered() {
    let gpu = gpu();
    let shape = AttentionShape::new(4, 16, 1000, 64);
    let options = ForwardOptions {
        causal: true,
        ..Default::default()
    };
    let elements = shape.q_elements().unwrap();
    let busy_source = DeviceBuffer::<u8>::zeroed(1 << 30).unwrap();
    let mut busy_target = DeviceBuffer::<u8>::zeroed(1 << 30).unwrap();
    for round in 0..3 {
        let seed = fresh_seed() ^ round;
        let inputs: Vec<Vec<f16>> = (0..3)
            .map(|i| random_normal::<f16>(elements, 0.5, 1.0, seed ^ (i << 8)))
            .collect();

        // Every step waited for: the bits the others must give.
        let [q, k, v] = [0, 1, 2].map(|i| DeviceBuffer::from_slice(&inputs[i]).unwrap());
        CurrentContext::synchronize().unwrap();
        let mut output = DeviceBuffer::from_slice(&vec![f16::NAN; elements]).unwrap();
        CurrentContext::synchronize().unwrap();
        gpu.forward(&q, &k, &v, &mut output, None, shape, &options)
            .unwrap();
        gpu.synchronize().unwrap();
        let mut expected = vec![f16::NAN; elements];
        output.copy_to(&mut expected).unwrap();
        assert!(expected.iter().all(|x| x.is_finite()), "seed {seed}");

        occupy_legacy_stream(&busy_source, &mut busy_target);
        let hosted = gpu
            .forward_host(&inputs[0], &inputs[1], &inputs[2], shape, &options)
            .unwrap();
        assert_eq!(bits(&hosted), bits(&expected), "forward_host, seed {seed}");

        let locked: Vec<LockedBuffer<f16>> = inputs
            .iter()
            .map(|input| LockedBuffer::from_slice(input).unwrap())
            .collect();
        occupy_legacy_stream(&busy_source, &mut busy_target);
        let hosted = gpu
            .forward_host(&locked[0], &locked[1], &locked[2], shape, &options)
            .unwrap();
        assert_eq!(bits(&hosted), bits(&expected), "page-locked, seed {seed}");

        // cust's synchronous copies with no synchronisation of ours in between.
        occupy_legacy_stream(&busy_source, &mut busy_target);
        let [q, k, v] = [0, 1, 2].map(|i| DeviceBuffer::from_slice(&inputs[i]).unwrap());
        let mut output = DeviceBuffer::from_slice(&vec![f16::NAN; elements]).unwrap();
        gpu.forward(&q, &k, &v, &mut output, None, shape, &options)
            .unwrap();
        let mut copied = vec![f16::NAN; elements];
        output.copy_to(&mut copied).unwrap();
        assert_eq!(bits(&copied), bits(&expected), "cust copies, seed {seed}");
    }
}

/// Runs `problem` on `gpu` `times` times, each into fresh poisoned buffers, and returns each
/// run's output bits.
fn outputs(gpu: &FlashAttention, problem: &Problem<f16>, times: usize) -> Vec<Vec<u16>> {
    let options = problem.options(Layout::Bhsd, None);
    (0..times)
        .map(|_| {
            let run = problem.run(gpu, &options).unwrap();
            run.output
                .iter()
                .map(|&x| f16::from_f64(x).to_bits())
                .collect()
        })
        .collect()
}

/// Several threads call `forward` at once, each on its own instance and stream, and then all
/// on one shared instance (`FlashAttention` is `Send + Sync`): every output has the bits of the
/// same problem run serially.
pub(crate) fn concurrent_calls_give_the_bits_of_serial_calls() {
    let gpu = gpu();
    let shapes = [
        (AttentionShape::new(4, 8, 512, 64), false),
        (AttentionShape::new(2, 8, 1000, 128), true),
        (
            AttentionShape {
                batch: 3,
                heads_q: 16,
                heads_kv: 4,
                seq_len_q: 333,
                seq_len_kv: 777,
                head_dim: 64,
            },
            true,
        ),
        (AttentionShape::new(1, 32, 4097, 64), false),
    ];
    let problems: Vec<Problem<f16>> = shapes
        .iter()
        .map(|&(shape, causal)| Problem::new(shape, causal, None))
        .collect();
    let serial: Vec<Vec<u16>> = problems
        .iter()
        .map(|problem| {
            problem.check(&gpu, &problem.options(Layout::Bhsd, None));
            outputs(&gpu, problem, 1).remove(0)
        })
        .collect();
    let repeats = 6;
    let start = Barrier::new(problems.len());
    std::thread::scope(|scope| {
        for (problem, expected) in problems.iter().zip(&serial) {
            let start = &start;
            scope.spawn(move || {
                let own = crate::support::gpu();
                start.wait();
                for (run, output) in outputs(&own, problem, repeats).iter().enumerate() {
                    assert!(
                        output == expected,
                        "own instance, run {run}, {:?}",
                        problem.shape
                    );
                }
            });
        }
    });
    let shared = &gpu;
    std::thread::scope(|scope| {
        for (problem, expected) in problems.iter().zip(&serial) {
            let start = &start;
            scope.spawn(move || {
                // Buffers are allocated in the current context: the device's primary one, which
                // `shared` uses too.
                let _context = Context::new(Device::get_device(0).unwrap()).unwrap();
                start.wait();
                for (run, output) in outputs(shared, problem, repeats).iter().enumerate() {
                    assert!(
                        output == expected,
                        "shared instance, run {run}, {:?}",
                        problem.shape
                    );
                }
            });
        }
    });
}
