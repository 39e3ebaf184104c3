use cust::memory::{CopyDestination, DeviceBuffer};
use flash_attn::reference::{attention, error_stats, random_normal_f16, ErrorStats, Precision};
use flash_attn::{AttentionShape, Error, FlashAttention, ForwardKernel, ForwardOptions};
use half::f16;

/// The fp16 bit pattern every output element holds before a run: a NaN, so an element the
/// kernel never writes cannot pass.
pub const POISON: u16 = 0x7E00;

/// The error budget beyond 2x the plain-fp16 error: half an fp16 ulp in [0.5, 1), where the
/// outputs of these inputs lie, for the final rounding both implementations do.
pub const ABSOLUTE_TOLERANCE: f64 = 2.5e-4;

/// The GPU, or `None` (after one line saying why) where there is none.
pub fn gpu() -> Option<FlashAttention> {
    match FlashAttention::new() {
        Ok(attention) => Some(attention),
        Err(Error::NoGpu(error)) if std::env::var_os("FLASH_ATTN_REQUIRE_GPU").is_none() => {
            eprintln!("skipping GPU test: no CUDA GPU ({error})");
            None
        }
        Err(error) => panic!("could not set up the GPU: {error}"),
    }
}

/// A fresh seed per call (time-based), or `FLASH_ATTN_SEED` to replay a failure.
pub fn fresh_seed() -> u64 {
    if let Some(seed) = std::env::var("FLASH_ATTN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return seed;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos();
    (nanos as u64) ^ (nanos >> 64) as u64
}

/// Random Q, K, V with nonzero mean (0.5) and unit spread, and their f64 reference output.
pub struct Problem {
    pub shape: AttentionShape,
    pub seed: u64,
    pub softmax_scale: f32,
    pub q: Vec<f16>,
    pub k: Vec<f16>,
    pub v: Vec<f16>,
    pub reference: Vec<f64>,
    /// Error of a plain fp16 implementation against `reference`.
    pub plain_f16_error: ErrorStats,
}

impl Problem {
    pub fn new(shape: AttentionShape, softmax_scale: Option<f32>) -> Self {
        let seed = fresh_seed();
        let elements = shape.elements();
        let q = random_normal_f16(elements, 0.5, 1.0, seed);
        let k = random_normal_f16(elements, 0.5, 1.0, seed ^ 0x5555);
        let v = random_normal_f16(elements, 0.5, 1.0, seed ^ 0xAAAA);
        let softmax_scale = softmax_scale.unwrap_or(shape.default_softmax_scale());
        let scale = softmax_scale as f64;
        let reference = attention(&q, &k, &v, shape, scale, Precision::F64);
        let plain = attention(&q, &k, &v, shape, scale, Precision::PlainF16);
        let plain_f16_error = error_stats(plain, &reference);
        Self {
            shape,
            seed,
            softmax_scale,
            q,
            k,
            v,
            reference,
            plain_f16_error,
        }
    }

    /// Runs `kernel` on poisoned output and returns the output.
    pub fn run(
        &self,
        gpu: &FlashAttention,
        kernel: &'static ForwardKernel,
    ) -> Result<Vec<f16>, Error> {
        let (q, k, v) = (
            DeviceBuffer::from_slice(&self.q)?,
            DeviceBuffer::from_slice(&self.k)?,
            DeviceBuffer::from_slice(&self.v)?,
        );
        let mut output =
            DeviceBuffer::from_slice(&vec![f16::from_bits(POISON); self.shape.elements()])?;
        let options = ForwardOptions {
            softmax_scale: Some(self.softmax_scale),
            kernel: Some(kernel),
        };
        gpu.forward(&q, &k, &v, &mut output, self.shape, &options)?;
        gpu.synchronize()?;
        let mut host = vec![f16::ZERO; self.shape.elements()];
        output.copy_to(&mut host[..])?;
        Ok(host)
    }

    /// Runs `kernel` and asserts the tolerance rule: no NaN, and max and mean absolute error
    /// at most twice the plain-fp16 error plus [`ABSOLUTE_TOLERANCE`].
    pub fn check(&self, gpu: &FlashAttention, kernel: &'static ForwardKernel) -> ErrorStats {
        let output = self.run(gpu, kernel).unwrap_or_else(|error| {
            panic!(
                "{} on {:?} failed to run: {error}",
                kernel.entry, self.shape
            )
        });
        let ours = error_stats(output.iter().map(|x| x.to_f64()), &self.reference);
        let plain = self.plain_f16_error;
        let context = format!(
            "{} on {:?}, seed {} (replay with FLASH_ATTN_SEED={}): ours {ours:?}, plain fp16 {plain:?}",
            kernel.entry, self.shape, self.seed, self.seed
        );
        assert_eq!(ours.non_finite, 0, "non-finite outputs: {context}");
        assert!(
            ours.max_abs <= 2.0 * plain.max_abs + ABSOLUTE_TOLERANCE,
            "max error: {context}"
        );
        assert!(
            ours.mean_abs <= 2.0 * plain.mean_abs + ABSOLUTE_TOLERANCE,
            "mean error: {context}"
        );
        println!("{context}");
        ours
    }
}

/// Whether `kernel` can run `shape` (its tiles divide the sequence length).
pub fn fits(kernel: &ForwardKernel, shape: AttentionShape) -> bool {
    shape.seq_len.is_multiple_of(kernel.tile.seq_len_multiple())
}
