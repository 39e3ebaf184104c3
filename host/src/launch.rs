//! The raw launch: the only place where device addresses cross to the GPU.

use std::ffi::c_void;

use cust::sys::{cuLaunchKernel, CUfunction, CUstream};
use flash_attn_params::{
    Dtype, ForwardParams, KernelSpec, TensorStrides, CHUNK_BYTES, CHUNK_ELEMS, TENSOR_MAPS_BYTES,
    TENSOR_MAP_BYTES, TMA_BOX_COLUMNS,
};

use crate::{driver, Error};

/// Enqueues one forward kernel on `stream` without waiting for it.
///
/// # Safety
/// - `function` is the entry compiled for `spec`, from a module loaded in the context current
///   on this thread, and `stream` belongs to that context.
/// - `params` is the kernel's argument type (`ForwardParams` for a dense kernel,
///   `ModifiedParams` for a modified one, each where it takes no tensor maps, else
///   [`launch_with_tensor_maps`]; `ServingParams` for a serving one) and satisfies the kernel's
///   contract (`flash_attn_kernels::fwd::sm80::forward`): every row its strides name for
///   `grid` is a 16-byte-aligned device address that stays valid until the kernel finishes,
///   readable for q, k, v and writable for o (and lse, if not 0); output rows don't overlap
///   each other or the inputs.
pub(crate) unsafe fn launch_forward(
    stream: CUstream,
    function: CUfunction,
    spec: &KernelSpec,
    grid: (u32, u32, u32),
    mut params: impl Copy,
) -> Result<(), Error> {
    // The kernel takes one by-value argument, a `#[repr(C)]` parameter struct: the driver
    // copies its size (from the kernel's signature) from this pointer before returning.
    launch_with_arguments(
        stream,
        function,
        spec,
        grid,
        &mut [&mut params as *mut _ as *mut c_void],
    )
}

/// The Q, K and V tensor maps (`CUtensorMap`s) that an sm90 kernel takes after its
/// `ForwardParams` ([`KernelSpec::takes_tensor_maps`]), 64-byte aligned as TMA reads them.
#[repr(C, align(64))]
struct TensorMaps([[u64; TENSOR_MAP_BYTES / 8]; 3]);

const _: () = assert!(std::mem::size_of::<TensorMaps>() == TENSOR_MAPS_BYTES);

/// The byte stride of a tensor map's dimension of `extent` elements, `stride` elements apart:
/// 0 where the dimension has one element, whose stride no box crosses and which may be any
/// value the problem allows, where the driver takes strides below
/// [`flash_attn_params::TMA_STRIDE_BYTES_LIMIT`] only. The one rule that the launch encodes and
/// the plan checks ([`crate::problem`]).
pub(crate) const fn tensor_map_stride_bytes(stride: u64, extent: u64) -> u64 {
    if extent > 1 {
        stride.saturating_mul((CHUNK_BYTES / CHUNK_ELEMS) as u64)
    } else {
        0
    }
}

/// One tensor of a kernel's TMA copies ([`KernelSpec::copies_by_tma`]): Q's or K's or V's
/// address and strides (in elements), its rows per (batch, head) and heads, and the rows of
/// the kernel's tile of it (`block_m` for Q, `block_n` for K and V).
struct TmaTensor<'a> {
    address: u64,
    strides: &'a TensorStrides,
    rows: u32,
    heads: u32,
    tile_rows: usize,
}

impl<'a> TmaTensor<'a> {
    /// The Q, K and V of `params` for `spec`'s tiles.
    fn of_problem(spec: &KernelSpec, params: &'a ForwardParams) -> [Self; 3] {
        let heads_kv = params.heads_q / params.kv_group_size;
        let key_tensor = |address, strides| TmaTensor {
            address,
            strides,
            rows: params.seq_len_kv,
            heads: heads_kv,
            tile_rows: spec.tile.block_n,
        };
        [
            TmaTensor {
                address: params.q,
                strides: &params.q_strides,
                rows: params.seq_len_q,
                heads: params.heads_q,
                tile_rows: spec.tile.block_m,
            },
            key_tensor(params.k, &params.k_strides),
            key_tensor(params.v, &params.v_strides),
        ]
    }
}

/// The tensor map of `tensor` for `spec`'s TMA copies ([`KernelSpec::copies_by_tma`]):
/// `[batch, heads, rows, head_dim]`, innermost first, in boxes of [`TMA_BOX_COLUMNS`] columns
/// and the tile's rows laid out with the 128-byte swizzle (the kernel's shared-memory tile),
/// rows and columns past the end read as zeros; the byte strides [`tensor_map_stride_bytes`]'s,
/// which the plan checked ([`crate::problem`]).
fn tensor_map(
    spec: &KernelSpec,
    params: &ForwardParams,
    tensor: &TmaTensor,
) -> Result<[u64; TENSOR_MAP_BYTES / 8], Error> {
    // `CU_TENSOR_MAP_DATA_TYPE_FLOAT16` and `_BFLOAT16`, `CU_TENSOR_MAP_SWIZZLE_128B`,
    // `CU_TENSOR_MAP_L2_PROMOTION_L2_256B`; interleave and out-of-bounds fill none (zeros).
    let data_type = match spec.dtype {
        Dtype::F16 => 6,
        Dtype::Bf16 => 9,
    };
    const SWIZZLE_128B: u32 = 3;
    const L2_PROMOTION_256B: u32 = 3;
    let dims = [
        params.head_dim as u64,
        tensor.rows as u64,
        tensor.heads as u64,
        params.batch as u64,
    ];
    let strides = tensor.strides;
    let byte_strides = [
        tensor_map_stride_bytes(strides.seq, dims[1]),
        tensor_map_stride_bytes(strides.head, dims[2]),
        tensor_map_stride_bytes(strides.batch, dims[3]),
    ];
    let box_dims = [TMA_BOX_COLUMNS as u32, tensor.tile_rows as u32, 1, 1];
    let element_strides = [1u32; 4];
    let encode = driver::tensor_map_encode_tiled()?;
    let mut map = [0u64; TENSOR_MAP_BYTES / 8];
    // SAFETY: the arrays have the lengths rank 4 needs (3 strides); the driver reads them and
    // writes `map`, nothing else.
    let result = unsafe {
        encode(
            &mut map,
            data_type,
            4,
            tensor.address as *mut c_void,
            dims.as_ptr(),
            byte_strides.as_ptr(),
            box_dims.as_ptr(),
            element_strides.as_ptr(),
            0,
            SWIZZLE_128B,
            L2_PROMOTION_256B,
            0,
        )
    };
    driver::check("cuTensorMapEncodeTiled", result)?;
    Ok(map)
}

/// [`launch_forward`] for a dense or modified kernel, whose `ForwardParams` are `forward`
/// (`params` itself, or its first field): one that takes the Q, K and V tensor maps gets them
/// besides (zeros for one that does not copy by TMA, which never reads them).
///
/// # Safety
/// As for [`launch_forward`].
pub(crate) unsafe fn launch_with_tensor_maps(
    stream: CUstream,
    function: CUfunction,
    spec: &KernelSpec,
    grid: (u32, u32, u32),
    mut params: impl Copy,
    forward: &ForwardParams,
) -> Result<(), Error> {
    if !spec.takes_tensor_maps() {
        return launch_forward(stream, function, spec, grid, params);
    }
    let mut maps = TensorMaps([[0; TENSOR_MAP_BYTES / 8]; 3]);
    if spec.copies_by_tma() {
        for (map, tensor) in maps.0.iter_mut().zip(TmaTensor::of_problem(spec, forward)) {
            *map = tensor_map(spec, forward, &tensor)?;
        }
    }
    launch_with_arguments(
        stream,
        function,
        spec,
        grid,
        &mut [
            &mut params as *mut _ as *mut c_void,
            &mut maps as *mut _ as *mut c_void,
        ],
    )
}

/// `cuLaunchKernel` of `spec`'s block on `grid` with `arguments`, one pointer per kernel
/// parameter, whose values the driver copies before returning.
///
/// # Safety
/// As for [`launch_forward`], for the kernel's parameters.
unsafe fn launch_with_arguments(
    stream: CUstream,
    function: CUfunction,
    spec: &KernelSpec,
    grid: (u32, u32, u32),
    arguments: &mut [*mut c_void],
) -> Result<(), Error> {
    let result = cuLaunchKernel(
        function,
        grid.0,
        grid.1,
        grid.2,
        spec.tile.threads() as u32,
        1,
        1,
        spec.smem_bytes() as u32,
        stream,
        arguments.as_mut_ptr(),
        std::ptr::null_mut(),
    );
    driver::check("cuLaunchKernel", result)
}
