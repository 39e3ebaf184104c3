//! A FlashAttention forward pass written in pure Rust.
//!
//! The kernels are `#![no_std]` Rust compiled to PTX for sm_89 (the `kernels-gpu` crate); this
//! crate embeds that PTX, loads it through `cust`, validates every call and launches it.
//!
//! ```no_run
//! use flash_attn::{AttentionShape, FlashAttention, ForwardOptions};
//! use half::f16;
//!
//! let shape = AttentionShape { batch: 4, heads: 8, seq_len: 512, head_dim: 64 };
//! let q = vec![f16::from_f32(0.1); shape.elements()];
//! let attention = FlashAttention::new()?;
//! let output = attention.forward_host(&q, &q, &q, shape, &ForwardOptions::default())?;
//! assert_eq!(output.len(), shape.elements());
//! # Ok::<(), flash_attn::Error>(())
//! ```

mod error;
mod kernels;
mod launch;
pub mod reference;
pub mod timing;

use cust::memory::{CopyDestination, DeviceBuffer, DeviceSlice};
use cust::stream::{Stream, StreamFlags};
pub use flash_attn_params::{
    ForwardKernel, ForwardParams, TileConfig, FORWARD_KERNELS, SM89_MAX_SMEM_PER_BLOCK,
};
use half::f16;

pub use error::{Error, SUPPORTED_HEAD_DIMS};
pub use kernels::{default_kernel, kernel_by_name, PTX};

/// Grid y holds `batch * heads` and is limited to 65535 blocks.
const MAX_GRID_Y: usize = 65_535;

/// The shape of Q, K, V and O: each is `[batch, heads, seq_len, head_dim]`, contiguous, fp16.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    pub batch: usize,
    pub heads: usize,
    pub seq_len: usize,
    pub head_dim: usize,
}

impl AttentionShape {
    /// Elements in each of Q, K, V and O.
    pub fn elements(&self) -> usize {
        self.batch * self.heads * self.seq_len * self.head_dim
    }

    /// Floating-point operations of one forward pass: `4 · B · H · S² · D`.
    pub fn flops(&self) -> f64 {
        4.0 * (self.batch * self.heads) as f64
            * (self.seq_len as f64).powi(2)
            * self.head_dim as f64
    }

    /// `1 / sqrt(head_dim)`, the default softmax scale.
    pub fn default_softmax_scale(&self) -> f32 {
        1.0 / (self.head_dim as f32).sqrt()
    }
}

/// Options of a forward pass; `Default` gives the usual attention.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ForwardOptions {
    /// Multiplies `Q Kᵀ` before the softmax. `None` means `1 / sqrt(head_dim)`.
    pub softmax_scale: Option<f32>,
    /// The compiled kernel to run (an entry of [`FORWARD_KERNELS`]). `None` means
    /// [`default_kernel`].
    pub kernel: Option<&'static ForwardKernel>,
}

/// The forward pass on one GPU: a CUDA context, the loaded kernels and a stream.
pub struct FlashAttention {
    // Field order is drop order: the stream must go before the context inside `kernels`.
    stream: Stream,
    kernels: kernels::LoadedKernels,
}

impl FlashAttention {
    /// Uses the first GPU.
    pub fn new() -> Result<Self, Error> {
        Self::on_device(0)
    }

    /// Uses GPU `ordinal`. Fails with [`Error::NoGpu`] where there is none, and with a specific
    /// error where the device or driver is too old for the kernels.
    pub fn on_device(ordinal: u32) -> Result<Self, Error> {
        let kernels = kernels::LoadedKernels::load(ordinal)?;
        let stream = Stream::new(StreamFlags::NON_BLOCKING, None)?;
        Ok(Self { stream, kernels })
    }

    pub fn device_name(&self) -> &str {
        &self.kernels.device_name
    }

    /// The stream every forward pass of this instance is enqueued on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Waits until every enqueued forward pass has finished.
    pub fn synchronize(&self) -> Result<(), Error> {
        Ok(self.stream.synchronize()?)
    }

    /// Enqueues `output = softmax(q kᵀ · scale) v` on [`Self::stream`] and returns without
    /// waiting. Every argument is validated first; nothing is launched on error.
    pub fn forward(
        &self,
        q: &DeviceSlice<f16>,
        k: &DeviceSlice<f16>,
        v: &DeviceSlice<f16>,
        output: &mut DeviceSlice<f16>,
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<(), Error> {
        let kernel = options.kernel.unwrap_or(default_kernel());
        let scale = validate(shape, kernel, options)?;
        let tensors = [("q", q), ("k", k), ("v", v), ("output", &*output)];
        for (tensor, buffer) in tensors {
            if buffer.len() != shape.elements() {
                return Err(Error::BufferLength {
                    tensor,
                    expected: shape.elements(),
                    actual: buffer.len(),
                });
            }
            let address = buffer.as_device_ptr().as_raw();
            if address % 16 != 0 {
                return Err(Error::MisalignedBuffer { tensor, address });
            }
        }
        let params = ForwardParams {
            q: q.as_device_ptr().as_raw(),
            k: k.as_device_ptr().as_raw(),
            v: v.as_device_ptr().as_raw(),
            o: output.as_device_ptr().as_raw(),
            seq_len: shape.seq_len as u32,
            scale_log2: scale * std::f32::consts::LOG2_E,
        };
        let function = self.kernels.module.get_function(kernel.entry)?;
        let blocks_y = (shape.batch * shape.heads) as u32;
        // SAFETY: `function` is `kernel`'s entry in this context's module; the four buffers
        // were checked above to hold `shape.elements()` elements each (what the grid covers)
        // and to be 16-byte aligned; `validate` checked the tiling of `seq_len`. `output` is
        // borrowed mutably, so it cannot alias an input, and the borrows outlive this call;
        // callers that free buffers before synchronising are protected by cust's own
        // stream-ordered frees.
        unsafe { launch::launch_forward(&self.stream, &function, &kernel.tile, blocks_y, params) }?;
        Ok(())
    }

    /// Copies host tensors to the GPU, runs [`Self::forward`], waits and copies the result back.
    pub fn forward_host(
        &self,
        q: &[f16],
        k: &[f16],
        v: &[f16],
        shape: AttentionShape,
        options: &ForwardOptions,
    ) -> Result<Vec<f16>, Error> {
        let kernel = options.kernel.unwrap_or(default_kernel());
        validate(shape, kernel, options)?;
        for (tensor, values) in [("q", q), ("k", k), ("v", v)] {
            if values.len() != shape.elements() {
                return Err(Error::BufferLength {
                    tensor,
                    expected: shape.elements(),
                    actual: values.len(),
                });
            }
        }
        let (q, k, v) = (
            DeviceBuffer::from_slice(q)?,
            DeviceBuffer::from_slice(k)?,
            DeviceBuffer::from_slice(v)?,
        );
        // SAFETY: f16 is plain data, and every element is written by the kernel before the copy
        // back (the grid covers the whole output).
        let mut output = unsafe { DeviceBuffer::<f16>::uninitialized(shape.elements())? };
        self.forward(&q, &k, &v, &mut output, shape, options)?;
        self.synchronize()?;
        let mut host = vec![f16::ZERO; shape.elements()];
        output.copy_to(&mut host[..])?;
        Ok(host)
    }
}

/// Checks everything about a problem that does not depend on buffers, and returns the
/// softmax scale to use.
fn validate(
    shape: AttentionShape,
    kernel: &ForwardKernel,
    options: &ForwardOptions,
) -> Result<f32, Error> {
    for (dimension, value) in [
        ("batch", shape.batch),
        ("heads", shape.heads),
        ("seq_len", shape.seq_len),
        ("head_dim", shape.head_dim),
    ] {
        if value == 0 {
            return Err(Error::ZeroSizedDimension { dimension });
        }
    }
    if shape.head_dim != kernel.tile.head_dim {
        return Err(Error::UnsupportedHeadDim {
            head_dim: shape.head_dim,
            supported: SUPPORTED_HEAD_DIMS,
        });
    }
    let multiple = kernel.tile.seq_len_multiple();
    if !shape.seq_len.is_multiple_of(multiple) {
        return Err(Error::SeqLenNotTileMultiple {
            seq_len: shape.seq_len,
            multiple,
        });
    }
    if shape.seq_len > u32::MAX as usize {
        return Err(Error::ProblemTooLarge {
            dimension: "seq_len",
            value: shape.seq_len,
            limit: u32::MAX as usize,
        });
    }
    if shape.batch * shape.heads > MAX_GRID_Y {
        return Err(Error::ProblemTooLarge {
            dimension: "batch * heads",
            value: shape.batch * shape.heads,
            limit: MAX_GRID_Y,
        });
    }
    let scale = options
        .softmax_scale
        .unwrap_or(shape.default_softmax_scale());
    if !(scale.is_finite() && scale > 0.0) {
        return Err(Error::InvalidSoftmaxScale { scale });
    }
    Ok(scale)
}
