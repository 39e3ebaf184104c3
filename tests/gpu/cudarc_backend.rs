//! The cudarc backend (feature `cudarc`): every call over cudarc buffers of half 2's `f16` and
//! `bf16`, uploaded on one stream of the primary context and run on another (so that cudarc's
//! event tracking is on and the calls must order themselves after the uploads), against the
//! f64 reference and the cust path's bits (ALiBi with host slopes and with slopes on the
//! device included, on every serving call too); the context, buffer and slope checks, which
//! launch nothing. Outputs and logsumexps are poisoned with NaN before every run.

use std::sync::Arc;

use cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, CudaView, DevicePtrMut, DeviceRepr, ValidAsZeroBits,
};
use cust::memory::{CopyDestination, DeviceBuffer};
use flash_attn::reference::{
    attention, attention_with, error_stats, random_normal, within_tolerance, Precision, Scoring,
};
use flash_attn::{
    plan_kv_cache, AlibiLayout, AlibiSlopes, AttentionShape, CudarcAttention, Element, Error,
    FlashAttention, ForwardOptions, HalfElement, Layout, PagedKvCache, SlidingWindow,
    VarlenCacheShape, VarlenShape,
};
use half2::{bf16, f16};

use crate::alibi_serving::{self, Call, Entry};
use crate::modifiers::slopes;
use crate::support::{assert_logsumexps, fresh_seed, gpu};

/// A half 2 element type cudarc can copy.
trait Half2: HalfElement + DeviceRepr + ValidAsZeroBits {}
impl Half2 for f16 {}
impl Half2 for bf16 {}

/// The instance (the harness's load options), the device's primary context as cudarc's, a
/// stream for uploads and one for the calls.
struct Streams {
    gpu: FlashAttention,
    context: Arc<CudaContext>,
    uploads: Arc<CudaStream>,
    compute: Arc<CudaStream>,
}

fn streams() -> Streams {
    let gpu = gpu();
    let context = CudaContext::new(0).expect("cudarc opens device 0");
    let uploads = context.new_stream().expect("a cudarc stream");
    let compute = context.new_stream().expect("a cudarc stream");
    Streams {
        gpu,
        context,
        uploads,
        compute,
    }
}

/// `values` as the bits of the half 1.8 type, for the cust path.
fn half1<T: HalfElement>(values: &[T]) -> &[T::Half1] {
    bytemuck::cast_slice(values)
}

fn bits<T: HalfElement>(values: &[T]) -> &[u16] {
    bytemuck::cast_slice(values)
}

fn nan<T: HalfElement>(len: usize) -> Vec<T> {
    vec![bytemuck::cast(T::Half1::from_f64(f64::NAN)); len]
}

fn f64s<T: HalfElement>(values: &[T]) -> impl Iterator<Item = f64> + '_ {
    half1(values).iter().map(|x| x.to_f64())
}

/// Dense attention with grouped heads and tails, K read through a `CudaView` into a larger
/// buffer and the output written through a `CudaViewMut`, causal or not: within the reference
/// tolerance, the logsumexp too, and the bits of `forward_host` (which takes half 2's slices
/// as they are) on the same inputs.
fn dense_on_a_second_stream<T: Half2>() {
    let s = streams();
    let shape = AttentionShape {
        batch: 2,
        heads_q: 8,
        heads_kv: 2,
        seq_len_q: 100,
        seq_len_kv: 300,
        head_dim: 128,
    };
    let (q_len, kv_len) = (shape.q_elements().unwrap(), shape.kv_elements().unwrap());
    let lse_len = shape.lse_elements().unwrap();
    for causal in [false, true] {
        let seed = fresh_seed();
        let context = format!("{shape:?} causal={causal}, seed {seed} (FLASH_ATTN_SEED={seed})");
        let q: Vec<T> = random_normal(q_len, 0.5, 1.0, seed);
        let k: Vec<T> = random_normal(kv_len, 0.5, 1.0, seed ^ 0x5555);
        let v: Vec<T> = random_normal(kv_len, 0.5, 1.0, seed ^ 0xAAAA);
        let options = ForwardOptions {
            causal,
            ..ForwardOptions::default()
        };
        // K 64 elements (128 bytes) into its buffer, the output 64 into a poisoned one.
        let k_padded = [nan::<T>(64), k.clone()].concat();
        let device_q = s.uploads.clone_htod(&q).unwrap();
        let device_k = s.uploads.clone_htod(&k_padded).unwrap();
        let device_v = s.uploads.clone_htod(&v).unwrap();
        let mut device_output = s.uploads.clone_htod(&nan::<T>(64 + q_len)).unwrap();
        let mut device_lse = s.uploads.clone_htod(&vec![f32::NAN; lse_len]).unwrap();
        s.gpu
            .on_cudarc_stream(&s.compute)
            .unwrap()
            .forward(
                &device_q,
                &device_k.slice(64..),
                &device_v,
                &mut device_output.slice_mut(64..),
                Some(&mut device_lse),
                shape,
                &options,
            )
            .unwrap_or_else(|error| panic!("{context}: {error}"));
        let output = s.compute.clone_dtoh(&device_output).unwrap();
        let lse = s.compute.clone_dtoh(&device_lse).unwrap();
        assert!(
            bits(&output[..64]) == bits(&nan::<T>(64)),
            "{context}: the output's view was overrun"
        );
        let output = &output[64..];

        let scale = shape.default_softmax_scale() as f64;
        let exact = attention(&q, &k, &v, shape, scale, causal, Precision::F64);
        let dtype = T::Half1::DTYPE;
        let plain = attention(&q, &k, &v, shape, scale, causal, Precision::Plain(dtype));
        let plain = error_stats(plain.output, &exact.output);
        let ours = error_stats(f64s(output), &exact.output);
        assert!(
            within_tolerance(&ours, &plain),
            "{context}: error beyond tolerance: ours {ours:?}, plain {plain:?}"
        );
        assert_logsumexps(lse.iter().map(|&x| x as f64), &exact.logsumexp, &context);
        let from_host = s.gpu.forward_host(&q, &k, &v, shape, &options).unwrap();
        assert!(
            bits(&from_host) == bits(output),
            "{context}: the cudarc path's bits differ from forward_host's"
        );
    }
}

pub(crate) fn dense_fp16_on_a_second_stream() {
    dense_on_a_second_stream::<f16>();
}

pub(crate) fn dense_bf16_on_a_second_stream() {
    dense_on_a_second_stream::<bf16>();
}

/// Device copies of `values` for both paths: cudarc's (uploaded on `uploads`) and cust's.
fn both<T: Half2>(s: &Streams, values: &[T]) -> (CudaSlice<T>, DeviceBuffer<T::Half1>) {
    (
        s.uploads.clone_htod(values).unwrap(),
        DeviceBuffer::from_slice(half1(values)).unwrap(),
    )
}

fn both_u32(s: &Streams, values: &[u32]) -> (CudaSlice<u32>, DeviceBuffer<u32>) {
    (
        s.uploads.clone_htod(values).unwrap(),
        DeviceBuffer::from_slice(values).unwrap(),
    )
}

/// Downloads the cudarc run's output and logsumexp and the cust run's, and asserts they are
/// the same bits, and finite.
fn assert_same_bits<T: Half2>(
    s: &Streams,
    what: &str,
    cudarc: (&CudaSlice<T>, &CudaSlice<f32>),
    cust: (&DeviceBuffer<T::Half1>, &DeviceBuffer<f32>),
) {
    let output = s.compute.clone_dtoh(cudarc.0).unwrap();
    let lse = s.compute.clone_dtoh(cudarc.1).unwrap();
    s.gpu.synchronize().unwrap();
    let mut cust_output = vec![T::Half1::from_f64(0.0); cust.0.len()];
    cust.0.copy_to(&mut cust_output[..]).unwrap();
    let mut cust_lse = vec![0f32; cust.1.len()];
    cust.1.copy_to(&mut cust_lse[..]).unwrap();
    assert!(
        f64s(&output).all(f64::is_finite),
        "{what}: non-finite output"
    );
    assert!(
        bits(&output) == bits(&cust_output),
        "{what}: output bits differ from the cust path's"
    );
    let lse_bits = |lse: &[f32]| lse.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(
        lse_bits(&lse),
        lse_bits(&cust_lse),
        "{what}: logsumexp bits"
    );
}

/// The KV-cache calls (contiguous with split-KV, whose workspace the call allocates on the
/// caller's stream; paged, with a scrambled block table) and a variable-length batch through
/// cudarc give the bits of the cust calls, whose results the other GPU tests check against the
/// reference.
fn serving_calls<T: Half2>() {
    let s = streams();
    let seed = fresh_seed();
    let context = format!("seed {seed} (FLASH_ATTN_SEED={seed})");
    let on_stream = s.gpu.on_cudarc_stream(&s.compute).unwrap();

    // Decode against a contiguous cache of 4096 keys, 3001 used.
    let shape = AttentionShape {
        batch: 1,
        heads_q: 32,
        heads_kv: 8,
        seq_len_q: 1,
        seq_len_kv: 4096,
        head_dim: 128,
    };
    let options = ForwardOptions {
        causal: true,
        ..ForwardOptions::default()
    };
    let plan = plan_kv_cache(T::Half1::DTYPE, &shape, &options, s.gpu.sm_count()).unwrap();
    assert!(plan.splits() > 1, "the decode case must exercise split-KV");
    let (q_len, kv_len) = (shape.q_elements().unwrap(), shape.kv_elements().unwrap());
    let lse_len = shape.lse_elements().unwrap();
    let (q, q_cust) = both(&s, &random_normal::<T>(q_len, 0.5, 1.0, seed));
    let (k, k_cust) = both(&s, &random_normal::<T>(kv_len, 0.5, 1.0, seed ^ 1));
    let (v, v_cust) = both(&s, &random_normal::<T>(kv_len, 0.5, 1.0, seed ^ 2));
    let (lens, lens_cust) = both_u32(&s, &[3001]);
    let (mut out, mut out_cust) = both(&s, &nan::<T>(q_len));
    let (mut lse, mut lse_cust) = (
        s.uploads.clone_htod(&vec![f32::NAN; lse_len]).unwrap(),
        DeviceBuffer::from_slice(&vec![f32::NAN; lse_len]).unwrap(),
    );
    on_stream
        .forward_kv_cache(&q, &k, &v, &lens, &mut out, Some(&mut lse), shape, &options)
        .unwrap();
    s.gpu
        .forward_kv_cache(
            &q_cust,
            &k_cust,
            &v_cust,
            &lens_cust,
            &mut out_cust,
            Some(&mut lse_cust),
            shape,
            &options,
        )
        .unwrap();
    assert_same_bits(
        &s,
        &format!("contiguous cache: {context}"),
        (&out, &lse),
        (&out_cust, &lse_cust),
    );

    // Decode against a paged cache: 2 sequences of up to 8 pages of 16 keys, 100 and 37 used,
    // in 16 pages placed by a scrambled table.
    let paged = PagedKvCache {
        num_pages: 16,
        page_size: 16,
        pages_per_sequence: 8,
    };
    let shape = AttentionShape {
        batch: 2,
        heads_q: 8,
        heads_kv: 2,
        seq_len_q: 1,
        seq_len_kv: 128,
        head_dim: 64,
    };
    let options = ForwardOptions {
        layout: Layout::Bshd,
        ..ForwardOptions::default()
    };
    let pages_len = paged.num_pages * paged.page_size * shape.heads_kv * shape.head_dim;
    let (q_len, lse_len) = (shape.q_elements().unwrap(), shape.lse_elements().unwrap());
    let (q, q_cust) = both(&s, &random_normal::<T>(q_len, 0.5, 1.0, seed ^ 3));
    let (k, k_cust) = both(&s, &random_normal::<T>(pages_len, 0.5, 1.0, seed ^ 4));
    let (v, v_cust) = both(&s, &random_normal::<T>(pages_len, 0.5, 1.0, seed ^ 5));
    let table: Vec<u32> = (0..16).map(|page| (page * 7 + 3) % 16).collect();
    let (table, table_cust) = both_u32(&s, &table);
    let (lens, lens_cust) = both_u32(&s, &[100, 37]);
    let (mut out, mut out_cust) = both(&s, &nan::<T>(q_len));
    let (mut lse, mut lse_cust) = (
        s.uploads.clone_htod(&vec![f32::NAN; lse_len]).unwrap(),
        DeviceBuffer::from_slice(&vec![f32::NAN; lse_len]).unwrap(),
    );
    on_stream
        .forward_paged_kv_cache(
            &q,
            &k,
            &v,
            &table,
            &lens,
            &mut out,
            Some(&mut lse),
            shape,
            &paged,
            &options,
        )
        .unwrap();
    s.gpu
        .forward_paged_kv_cache(
            &q_cust,
            &k_cust,
            &v_cust,
            &table_cust,
            &lens_cust,
            &mut out_cust,
            Some(&mut lse_cust),
            shape,
            &paged,
            &options,
        )
        .unwrap();
    assert_same_bits(
        &s,
        &format!("paged cache: {context}"),
        (&out, &lse),
        (&out_cust, &lse_cust),
    );

    // A variable-length batch: 3 sequences of 7, 1 and 65 queries against 63, 1 and 5 keys.
    let (cu_seqlens_q, cu_seqlens_kv) = ([0u32, 7, 8, 73], [0u32, 63, 64, 69]);
    let shape = VarlenShape {
        cu_seqlens_q: &cu_seqlens_q,
        cu_seqlens_kv: &cu_seqlens_kv,
        heads_q: 8,
        heads_kv: 2,
        head_dim: 64,
    };
    let options = ForwardOptions {
        causal: true,
        layout: Layout::Bshd,
        ..ForwardOptions::default()
    };
    let (q_len, kv_len, lse_len) = (73 * 8 * 64, 69 * 2 * 64, 8 * 73);
    let (q, q_cust) = both(&s, &random_normal::<T>(q_len, 0.5, 1.0, seed ^ 6));
    let (k, k_cust) = both(&s, &random_normal::<T>(kv_len, 0.5, 1.0, seed ^ 7));
    let (v, v_cust) = both(&s, &random_normal::<T>(kv_len, 0.5, 1.0, seed ^ 8));
    let (mut out, mut out_cust) = both(&s, &nan::<T>(q_len));
    let (mut lse, mut lse_cust) = (
        s.uploads.clone_htod(&vec![f32::NAN; lse_len]).unwrap(),
        DeviceBuffer::from_slice(&vec![f32::NAN; lse_len]).unwrap(),
    );
    on_stream
        .forward_varlen(&q, &k, &v, &mut out, Some(&mut lse), &shape, &options)
        .unwrap();
    s.gpu
        .forward_varlen(
            &q_cust,
            &k_cust,
            &v_cust,
            &mut out_cust,
            Some(&mut lse_cust),
            &shape,
            &options,
        )
        .unwrap();
    assert_same_bits(
        &s,
        &format!("variable-length batch: {context}"),
        (&out, &lse),
        (&out_cust, &lse_cust),
    );

    // Variable-length queries against a paged cache of the geometry, table and lengths above:
    // 2 sequences of 5 and 1 new tokens, against their 100 and 37 cached keys.
    let cu_seqlens_q = [0u32, 5, 6];
    let shape = VarlenCacheShape {
        cu_seqlens_q: &cu_seqlens_q,
        heads_q: 8,
        heads_kv: 2,
        seq_len_kv: 128,
        head_dim: 64,
    };
    let (q_len, lse_len) = (6 * 8 * 64, 8 * 6);
    let (q, q_cust) = both(&s, &random_normal::<T>(q_len, 0.5, 1.0, seed ^ 9));
    let (mut out, mut out_cust) = both(&s, &nan::<T>(q_len));
    let (mut lse, mut lse_cust) = (
        s.uploads.clone_htod(&vec![f32::NAN; lse_len]).unwrap(),
        DeviceBuffer::from_slice(&vec![f32::NAN; lse_len]).unwrap(),
    );
    let (k, k_cust) = both(&s, &random_normal::<T>(pages_len, 0.5, 1.0, seed ^ 10));
    let (v, v_cust) = both(&s, &random_normal::<T>(pages_len, 0.5, 1.0, seed ^ 11));
    on_stream
        .forward_varlen_paged_kv_cache(
            &q,
            &k,
            &v,
            &table,
            &lens,
            &mut out,
            Some(&mut lse),
            &shape,
            &paged,
            &options,
        )
        .unwrap();
    s.gpu
        .forward_varlen_paged_kv_cache(
            &q_cust,
            &k_cust,
            &v_cust,
            &table_cust,
            &lens_cust,
            &mut out_cust,
            Some(&mut lse_cust),
            &shape,
            &paged,
            &options,
        )
        .unwrap();
    assert_same_bits(
        &s,
        &format!("variable-length queries against a paged cache: {context}"),
        (&out, &lse),
        (&out_cust, &lse_cust),
    );
}

pub(crate) fn serving_calls_give_the_cust_bits_fp16() {
    serving_calls::<f16>();
}

pub(crate) fn serving_calls_give_the_cust_bits_bf16() {
    serving_calls::<bf16>();
}

/// A stream or buffer of another context, and buffers too short, are refused before anything
/// is launched: the poisoned output stays NaN.
pub(crate) fn other_contexts_and_short_buffers_are_rejected() {
    let s = streams();
    assert!(FlashAttention::for_cudarc_context(&s.context).is_ok());
    let other = CudaContext::new_non_primary(0, 0).expect("a non-primary context");
    let other_stream = other.new_stream().unwrap();
    let mismatch = |what| Error::ContextMismatch {
        what,
        device: 0,
        primary: false,
        instance_device: 0,
    };
    assert_eq!(
        FlashAttention::for_cudarc_context(&other).err(),
        Some(mismatch("context"))
    );
    assert_eq!(
        s.gpu.on_cudarc_stream(&other_stream).err(),
        Some(mismatch("stream"))
    );

    let shape = AttentionShape::new(1, 2, 64, 64);
    let len = shape.q_elements().unwrap();
    let q = s
        .uploads
        .clone_htod(&random_normal::<f16>(len, 0.5, 1.0, 1))
        .unwrap();
    let foreign_q = other_stream.alloc_zeros::<f16>(len).unwrap();
    let mut output = s.uploads.clone_htod(&nan::<f16>(len)).unwrap();
    let options = ForwardOptions::default();
    let on_stream = s.gpu.on_cudarc_stream(&s.compute).unwrap();
    assert_eq!(
        on_stream.forward(&foreign_q, &q, &q, &mut output, None, shape, &options),
        Err(mismatch("q"))
    );
    assert_eq!(
        on_stream.forward(
            &q,
            &q,
            &q,
            &mut output.slice_mut(1..),
            None,
            shape,
            &options
        ),
        Err(Error::BufferTooSmall {
            tensor: "o",
            required: len as u64,
            actual: len - 1,
        })
    );
    let cache_shape = AttentionShape {
        seq_len_q: 1,
        ..AttentionShape::new(2, 2, 32, 64)
    };
    let lens = s.uploads.clone_htod(&[32u32]).unwrap();
    let cache = s
        .uploads
        .clone_htod(&nan::<f16>(cache_shape.kv_elements().unwrap()))
        .unwrap();
    assert_eq!(
        on_stream.forward_kv_cache(
            &q,
            &cache,
            &cache,
            &lens,
            &mut output,
            None,
            cache_shape,
            &options
        ),
        Err(Error::CacheLengthsTooShort {
            lengths: 1,
            batch: 2
        })
    );
    let paged = PagedKvCache {
        num_pages: 4,
        page_size: 16,
        pages_per_sequence: 2,
    };
    let lens = s.uploads.clone_htod(&[32u32, 32]).unwrap();
    let table = s.uploads.clone_htod(&[0u32, 1, 2]).unwrap();
    assert_eq!(
        on_stream.forward_paged_kv_cache(
            &q,
            &cache,
            &cache,
            &table,
            &lens,
            &mut output,
            None,
            cache_shape,
            &paged,
            &options
        ),
        Err(Error::BlockTableTooShort {
            length: 3,
            required: 4
        })
    );
    let output = s.compute.clone_dtoh(&output).unwrap();
    assert!(
        f64s(&output).all(f64::is_nan),
        "a rejected call wrote its output"
    );
}

/// One ALiBi problem of [`alibi_calls`]: its slopes, options and inputs, and the buffers of
/// the cudarc runs (host slopes, device slopes) and the cust run.
struct AlibiRun<T: Half2> {
    layout: AlibiLayout,
    options: ForwardOptions,
    slopes: Vec<f32>,
    q: Vec<T>,
    k: Vec<T>,
    v: Vec<T>,
    host: (CudaSlice<T>, CudaSlice<f32>),
    device: (CudaSlice<T>, CudaSlice<f32>),
    cust: (DeviceBuffer<T::Half1>, DeviceBuffer<f32>),
}

/// ALiBi through cudarc, per query head and per (batch, query head), alone and with a window
/// and a softcap, causal or not: `forward_alibi` (host slopes, checked, uploaded on the
/// caller's stream) and `forward_alibi_device_slopes` (slopes uploaded on the other stream,
/// read through a view after that write) give the bits of the cust `forward_alibi`, within
/// the reference tolerance, the logsumexp too. Every case's cudarc calls are enqueued back to
/// back before anything is waited for, the slopes of one call differing from the next's in
/// count and values: each call reads its own.
fn alibi_calls<T: Half2>() {
    let s = streams();
    let on_stream = s.gpu.on_cudarc_stream(&s.compute).unwrap();
    let shape = AttentionShape {
        batch: 2,
        heads_q: 8,
        heads_kv: 2,
        seq_len_q: 129,
        seq_len_kv: 300,
        head_dim: 128,
    };
    let (q_len, kv_len) = (shape.q_elements().unwrap(), shape.kv_elements().unwrap());
    let lse_len = shape.lse_elements().unwrap();
    let seed = fresh_seed();
    let context = format!("{shape:?}, seed {seed} (FLASH_ATTN_SEED={seed})");
    let cases = [
        (AlibiLayout::PerHead, false, None, None),
        (AlibiLayout::PerBatchAndHead, true, None, None),
        (
            AlibiLayout::PerBatchAndHead,
            false,
            Some(SlidingWindow {
                left: Some(90),
                right: Some(7),
            }),
            Some(3.0),
        ),
        (AlibiLayout::PerHead, true, None, Some(5.0)),
    ];
    let poisoned = || {
        (
            s.uploads.clone_htod(&nan::<T>(q_len)).unwrap(),
            s.uploads.clone_htod(&vec![f32::NAN; lse_len]).unwrap(),
        )
    };
    let mut runs = Vec::new();
    for (case, (layout, causal, window, softcap)) in cases.into_iter().enumerate() {
        let case_seed = seed ^ ((case as u64) << 8);
        let options = ForwardOptions {
            causal,
            window,
            softcap,
            layout: Layout::Bshd,
            ..ForwardOptions::default()
        };
        let run = AlibiRun {
            layout,
            options,
            slopes: slopes(&shape, layout),
            q: random_normal(q_len, 0.5, 1.0, case_seed),
            k: random_normal(kv_len, 0.5, 1.0, case_seed ^ 1),
            v: random_normal(kv_len, 0.5, 1.0, case_seed ^ 2),
            host: poisoned(),
            device: poisoned(),
            cust: (
                DeviceBuffer::from_slice(half1(&nan::<T>(q_len))).unwrap(),
                DeviceBuffer::from_slice(&vec![f32::NAN; lse_len]).unwrap(),
            ),
        };
        runs.push(run);
    }
    let inputs: Vec<_> = runs
        .iter()
        .map(|run| (both(&s, &run.q), both(&s, &run.k), both(&s, &run.v)))
        .collect();
    // The device slopes a little into a larger buffer: read through a `CudaView`.
    let device_slopes: Vec<CudaSlice<f32>> = runs
        .iter()
        .map(|run| {
            let padded = [vec![f32::NAN; 3], run.slopes.clone()].concat();
            s.uploads.clone_htod(&padded).unwrap()
        })
        .collect();
    for (run, ((q, _), (k, _), (v, _))) in runs.iter_mut().zip(&inputs) {
        let alibi = AlibiSlopes {
            slopes: &run.slopes,
            layout: run.layout,
        };
        let (output, lse) = &mut run.host;
        on_stream
            .forward_alibi(q, k, v, output, Some(lse), alibi, shape, &run.options)
            .unwrap_or_else(|error| panic!("forward_alibi, {:?}: {error}", run.options));
    }
    for ((run, ((q, _), (k, _), (v, _))), slopes) in
        runs.iter_mut().zip(&inputs).zip(&device_slopes)
    {
        let (output, lse) = &mut run.device;
        on_stream
            .forward_alibi_device_slopes(
                q,
                k,
                v,
                output,
                Some(lse),
                &slopes.slice(3..),
                run.layout,
                shape,
                &run.options,
            )
            .unwrap_or_else(|error| {
                panic!("forward_alibi_device_slopes, {:?}: {error}", run.options)
            });
    }
    for (run, ((_, q), (_, k), (_, v))) in runs.iter_mut().zip(&inputs) {
        let alibi = AlibiSlopes {
            slopes: &run.slopes,
            layout: run.layout,
        };
        let (output, lse) = &mut run.cust;
        s.gpu
            .forward_alibi(q, k, v, output, Some(lse), alibi, shape, &run.options)
            .unwrap();
    }
    for run in &runs {
        let what = format!("{:?} {:?}: {context}", run.layout, run.options);
        let cust = (&run.cust.0, &run.cust.1);
        let host_what = format!("forward_alibi, {what}");
        assert_same_bits(&s, &host_what, (&run.host.0, &run.host.1), cust);
        let device_what = format!("forward_alibi_device_slopes, {what}");
        assert_same_bits(&s, &device_what, (&run.device.0, &run.device.1), cust);

        // Within the tolerance of the reference, which works in [batch, heads, seq, dim].
        let to_bhsd = |values: &[T], heads, seq_len| {
            let dims = (shape.batch, heads, seq_len, shape.head_dim);
            flash_attn::reference::relayout(values, dims, Layout::Bshd, Layout::Bhsd)
        };
        let (q, k, v) = (
            to_bhsd(&run.q, shape.heads_q, shape.seq_len_q),
            to_bhsd(&run.k, shape.heads_kv, shape.seq_len_kv),
            to_bhsd(&run.v, shape.heads_kv, shape.seq_len_kv),
        );
        let scoring = Scoring {
            softmax_scale: shape.default_softmax_scale() as f64,
            causal: run.options.causal,
            window: run.options.window,
            softcap: run.options.softcap.map(f64::from),
            alibi: Some(AlibiSlopes {
                slopes: &run.slopes,
                layout: run.layout,
            }),
        };
        let exact = attention_with(&q, &k, &v, shape, &scoring, Precision::F64);
        let plain_precision = Precision::Plain(T::Half1::DTYPE);
        let plain = attention_with(&q, &k, &v, shape, &scoring, plain_precision);
        let plain = error_stats(plain.output, &exact.output);
        let output = s.compute.clone_dtoh(&run.host.0).unwrap();
        let output = to_bhsd(&output, shape.heads_q, shape.seq_len_q);
        let ours = error_stats(f64s(&output), &exact.output);
        assert!(
            within_tolerance(&ours, &plain),
            "{what}: error beyond tolerance: ours {ours:?}, plain {plain:?}"
        );
        let lse = s.compute.clone_dtoh(&run.host.1).unwrap();
        assert_logsumexps(lse.iter().map(|&x| x as f64), &exact.logsumexp, &what);
    }
}

pub(crate) fn alibi_calls_give_the_cust_bits_fp16() {
    alibi_calls::<f16>();
}

pub(crate) fn alibi_calls_give_the_cust_bits_bf16() {
    alibi_calls::<bf16>();
}

/// The ALiBi calls' errors come before anything is enqueued, as the cust call's: too few
/// slopes (on the host or the device), a slope that is not finite or whose bias would overflow
/// (host slopes, checked in full), device slopes of another context. The poisoned output
/// stays NaN.
pub(crate) fn alibi_errors_come_before_any_launch() {
    let s = streams();
    let on_stream = s.gpu.on_cudarc_stream(&s.compute).unwrap();
    let shape = AttentionShape::new(1, 2, 100, 64);
    let len = shape.q_elements().unwrap();
    let q = s
        .uploads
        .clone_htod(&random_normal::<f16>(len, 0.5, 1.0, 3))
        .unwrap();
    let mut output = s.uploads.clone_htod(&nan::<f16>(len)).unwrap();
    let options = ForwardOptions::default();
    let per_head = |slopes| AlibiSlopes {
        slopes,
        layout: AlibiLayout::PerHead,
    };
    let host_cases: [(&[f32], Error); 4] = [
        (
            &[0.5],
            Error::AlibiSlopesTooShort {
                length: 1,
                required: 2,
            },
        ),
        (
            &[0.5, f32::NAN],
            Error::InvalidAlibiSlope {
                index: 1,
                slope: f32::NAN,
            },
        ),
        (
            &[f32::NEG_INFINITY, 0.5],
            Error::InvalidAlibiSlope {
                index: 0,
                slope: f32::NEG_INFINITY,
            },
        ),
        (
            &[0.5, f32::MAX],
            Error::InvalidAlibiSlope {
                index: 1,
                slope: f32::MAX,
            },
        ),
    ];
    for (slopes, expected) in host_cases {
        let result = on_stream.forward_alibi(
            &q,
            &q,
            &q,
            &mut output,
            None,
            per_head(slopes),
            shape,
            &options,
        );
        // NaN slopes compare by their bits.
        assert_eq!(
            format!("{:?}", result.unwrap_err()),
            format!("{expected:?}"),
            "host slopes {slopes:?}"
        );
    }
    // Device slopes: too few for either layout, then enough but of another context.
    let short = s.uploads.clone_htod(&[0.5f32, 0.25]).unwrap();
    let batched = AttentionShape { batch: 2, ..shape };
    let batched_q = s.uploads.clone_htod(&nan::<f16>(2 * len)).unwrap();
    let mut batched_output = s.uploads.clone_htod(&nan::<f16>(2 * len)).unwrap();
    for (layout, slopes, expected) in [
        (AlibiLayout::PerHead, 1, 2),
        (AlibiLayout::PerBatchAndHead, 2, 4),
    ] {
        assert_eq!(
            on_stream.forward_alibi_device_slopes(
                &batched_q,
                &batched_q,
                &batched_q,
                &mut batched_output,
                None,
                &short.slice(..slopes),
                layout,
                batched,
                &options,
            ),
            Err(Error::AlibiSlopesTooShort {
                length: slopes,
                required: expected,
            })
        );
    }
    let other = CudaContext::new_non_primary(0, 0).expect("a non-primary context");
    let foreign = other
        .new_stream()
        .unwrap()
        .clone_htod(&[0.5f32, 0.25])
        .unwrap();
    assert_eq!(
        on_stream.forward_alibi_device_slopes(
            &q,
            &q,
            &q,
            &mut output,
            None,
            &foreign,
            AlibiLayout::PerHead,
            shape,
            &options,
        ),
        Err(Error::ContextMismatch {
            what: "alibi_slopes",
            device: 0,
            primary: false,
            instance_device: 0,
        })
    );
    for output in [&output, &batched_output] {
        let output = s.compute.clone_dtoh(output).unwrap();
        assert!(
            f64s(&output).all(f64::is_nan),
            "a rejected ALiBi call wrote its output"
        );
    }
}

/// The slopes of one cudarc ALiBi serving call: on the host, or a view of device slopes.
#[derive(Clone, Copy)]
enum CudarcSlopes<'a> {
    Host(AlibiSlopes<'a>),
    Device(&'a CudaView<'a, f32>),
}

/// The cudarc buffers of one serving problem's inputs, uploaded on the upload stream.
struct ServingInputs<T: Half2> {
    q: CudaSlice<T>,
    k: CudaSlice<T>,
    v: CudaSlice<T>,
    cache_lens: CudaSlice<u32>,
    table: CudaSlice<u32>,
}

/// Runs `problem`'s call through its cudarc ALiBi form, host or device `slopes`, into `out`
/// and `lse`.
fn cudarc_alibi_call<T: Half2>(
    on_stream: &CudarcAttention,
    problem: &alibi_serving::Problem<T::Half1>,
    inputs: &ServingInputs<T>,
    slopes: CudarcSlopes,
    out: &mut CudaSlice<T>,
    lse: &mut CudaSlice<f32>,
) -> Result<(), Error> {
    let ServingInputs {
        q,
        k,
        v,
        cache_lens: lens,
        table,
    } = inputs;
    let (options, layout) = (&problem.options, problem.layout);
    let (shape, varlen, cache) = (
        problem.cache_shape(),
        problem.varlen_shape(),
        problem.varlen_cache_shape(),
    );
    let lse = Some(lse as &mut dyn DevicePtrMut<f32>);
    match (problem.call, slopes) {
        (Call::KvCache, CudarcSlopes::Host(alibi)) => {
            on_stream.forward_kv_cache_alibi(q, k, v, lens, out, lse, alibi, shape, options)
        }
        (Call::KvCache, CudarcSlopes::Device(slopes)) => on_stream
            .forward_kv_cache_alibi_device_slopes(
                q, k, v, lens, out, lse, slopes, layout, shape, options,
            ),
        (Call::PagedKvCache, CudarcSlopes::Host(alibi)) => on_stream.forward_paged_kv_cache_alibi(
            q,
            k,
            v,
            table,
            lens,
            out,
            lse,
            alibi,
            shape,
            &problem.paged(),
            options,
        ),
        (Call::PagedKvCache, CudarcSlopes::Device(slopes)) => on_stream
            .forward_paged_kv_cache_alibi_device_slopes(
                q,
                k,
                v,
                table,
                lens,
                out,
                lse,
                slopes,
                layout,
                shape,
                &problem.paged(),
                options,
            ),
        (Call::Varlen, CudarcSlopes::Host(alibi)) => {
            on_stream.forward_varlen_alibi(q, k, v, out, lse, alibi, &varlen, options)
        }
        (Call::Varlen, CudarcSlopes::Device(slopes)) => on_stream
            .forward_varlen_alibi_device_slopes(
                q, k, v, out, lse, slopes, layout, &varlen, options,
            ),
        (Call::VarlenKvCache, CudarcSlopes::Host(alibi)) => {
            on_stream.forward_varlen_kv_cache_alibi(q, k, v, lens, out, lse, alibi, &cache, options)
        }
        (Call::VarlenKvCache, CudarcSlopes::Device(slopes)) => on_stream
            .forward_varlen_kv_cache_alibi_device_slopes(
                q, k, v, lens, out, lse, slopes, layout, &cache, options,
            ),
        (Call::VarlenPagedKvCache, CudarcSlopes::Host(alibi)) => on_stream
            .forward_varlen_paged_kv_cache_alibi(
                q,
                k,
                v,
                table,
                lens,
                out,
                lse,
                alibi,
                &cache,
                &problem.paged(),
                options,
            ),
        (Call::VarlenPagedKvCache, CudarcSlopes::Device(slopes)) => on_stream
            .forward_varlen_paged_kv_cache_alibi_device_slopes(
                q,
                k,
                v,
                table,
                lens,
                out,
                lse,
                slopes,
                layout,
                &cache,
                &problem.paged(),
                options,
            ),
    }
}

/// Every serving call's ALiBi forms through cudarc, with a window and a softcap, causal,
/// split-KV in three where the call splits, one slope per (sequence, head): host slopes
/// (checked, uploaded on the caller's stream) and slopes on the device (uploaded on the other
/// stream, read through a view after that write) give the bits of the cust safe call, whose
/// results `alibi_serving` checks against the reference; too few device slopes are rejected
/// before anything is enqueued, the poisoned output staying NaN.
fn alibi_serving_calls<T: Half2>() {
    let s = streams();
    let on_stream = s.gpu.on_cudarc_stream(&s.compute).unwrap();
    let (window, softcap) = crate::support::SERVING_MODIFIERS[2];
    for call in alibi_serving::CALLS {
        let options = ForwardOptions {
            causal: true,
            window,
            softcap,
            num_splits: (call != Call::Varlen).then_some(3),
            ..ForwardOptions::default()
        };
        let problem = alibi_serving::Problem::<T::Half1>::new(
            call,
            &call.sequences(true),
            (8, 2),
            64,
            1024,
            options,
            AlibiLayout::PerBatchAndHead,
        );
        let what = format!(
            "{call:?}, seed {} (FLASH_ATTN_SEED={})",
            problem.seed, problem.seed
        );
        let (cust_output, cust_lse) = problem.run(&s.gpu, Entry::Safe).unwrap();
        let to_half2 = |values: &[T::Half1]| -> Vec<T> { bytemuck::cast_slice(values).to_vec() };
        let (k, v) = problem.device_kv();
        let inputs = ServingInputs {
            q: s.uploads.clone_htod(&to_half2(&problem.q)).unwrap(),
            k: s.uploads.clone_htod(&to_half2(&k)).unwrap(),
            v: s.uploads.clone_htod(&to_half2(&v)).unwrap(),
            cache_lens: s.uploads.clone_htod(&problem.cache_lens()).unwrap(),
            table: s.uploads.clone_htod(&problem.table()).unwrap(),
        };
        let device_slopes = s.uploads.clone_htod(&problem.slopes).unwrap();
        let (all, short) = (
            device_slopes.slice(..),
            device_slopes.slice(..problem.slopes.len() - 1),
        );
        let (output_len, lse_len) = problem.output_lengths();
        let runs = [
            ("host slopes", CudarcSlopes::Host(problem.alibi()), true),
            ("device slopes", CudarcSlopes::Device(&all), true),
            ("too few device slopes", CudarcSlopes::Device(&short), false),
        ];
        for (slopes_what, slopes, valid) in runs {
            let what = format!("{slopes_what}, {what}");
            let mut out = s.uploads.clone_htod(&nan::<T>(output_len)).unwrap();
            let mut lse = s.uploads.clone_htod(&vec![f32::NAN; lse_len]).unwrap();
            let result =
                cudarc_alibi_call(&on_stream, &problem, &inputs, slopes, &mut out, &mut lse);
            let output = s.compute.clone_dtoh(&out).unwrap();
            let lse = s.compute.clone_dtoh(&lse).unwrap();
            if !valid {
                let required = problem.slopes.len();
                assert_eq!(
                    result,
                    Err(Error::AlibiSlopesTooShort {
                        length: required - 1,
                        required
                    }),
                    "{what}"
                );
                assert!(f64s(&output).all(f64::is_nan), "{what}: output written");
                continue;
            }
            result.unwrap_or_else(|error| panic!("{what}: {error}"));
            assert!(
                bits(&output) == bits(&to_half2(&cust_output)),
                "{what}: output bits differ from the cust path's"
            );
            let lse_bits = |lse: &[f32]| lse.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                lse_bits(&lse),
                lse_bits(&cust_lse),
                "{what}: logsumexp bits"
            );
        }
    }
}

pub(crate) fn alibi_serving_calls_give_the_cust_bits_fp16() {
    alibi_serving_calls::<f16>();
}

pub(crate) fn alibi_serving_calls_give_the_cust_bits_bf16() {
    alibi_serving_calls::<bf16>();
}
