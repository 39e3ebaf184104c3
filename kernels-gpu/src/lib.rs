//! FlashAttention forward kernels in `#![no_std]` Rust, compiled by rustc's `nvptx64-nvidia-cuda`
//! backend to PTX, once for each PTX target of `flash_attn_params::ARCHITECTURES`: sm_80 for
//! the sm80 family (its cubins for sm_89 and sm_90 assembled from that PTX), sm_90a for the
//! sm90 family (Hopper's `wgmma`).
//!
//! - [`ptx`]: one wrapper per PTX instruction (`mma.sync`, `ldmatrix`, `cp.async`, `wgmma`, ...).
//! - [`smem`]: the swizzled and padded shared-memory tiles, and `wgmma`'s tiles and descriptors.
//! - [`element`]: fp16 and bf16 and their packing; [`mma`]: the MMA atoms that multiply them.
//! - [`fragment`]: register fragments as types that carry their layout.
//! - [`attn`]: what main loops share: the block's sequence information
//!   ([`attn::block_info`]), the mask ([`attn::mask`]), the online softmax on accumulator
//!   fragments ([`attn::softmax`]) and the epilogue ([`attn::epilogue`]).
//! - [`fwd`]: the forward pass: the sm80 main loop ([`fwd::sm80`]), generic over the MMA atom
//!   and the tile configuration, and the sm90 one ([`fwd::sm90`]).
//!
//! Every spec in [`flash_attn_params::for_each_kernel_entry_of_shard!`] becomes one PTX entry,
//! through [`forward_entries!`], which runs its family's main loop
//! ([`Family::Sm80`](flash_attn_params::Family::Sm80): [`fwd::sm80`];
//! [`Family::Sm90`](flash_attn_params::Family::Sm90): [`fwd::sm90`]), in one of the shard
//! crates under `shards/`: cargo compiles them in parallel, where one crate would run LLVM over
//! every entry on one core.
#![no_std]
#![feature(
    asm_experimental_arch,
    stdarch_nvptx,
    gpu_intrinsics,
    gpu_launch_sized_workgroup_mem,
    core_intrinsics,
    stmt_expr_attributes
)]
#![allow(internal_features)]
// Fragment loops index several arrays with the same MMA tile coordinates (m, n, d); written as
// index loops they read like the fragment layouts they implement.
#![allow(clippy::needless_range_loop)]

pub mod attn;
pub mod element;
pub mod fragment;
pub mod fwd;
pub mod mma;
pub mod ptx;
pub mod smem;

// For the entries that `forward_entries!` expands in the shard crates.
#[doc(hidden)]
pub use flash_attn_params::{
    built_spec, copy_warps, sm90_overlaps_blocks, sm90_producer_registers, sm90_register_split,
    ForwardParams, ModifiedParams, ModifiedServingParams, ModifierParams, QSource, SequenceParams,
    ServingParams, TileConfig, Variant,
};

/// The shared-memory tile type of a `SmemLayout` variant.
#[doc(hidden)]
#[macro_export]
macro_rules! shared_tile {
    (Swizzled, $head_dim:literal) => { $crate::smem::SwizzledTile<$head_dim> };
    (Padded, $head_dim:literal) => { $crate::smem::PaddedTile<$head_dim> };
}

/// Defines one PTX entry per spec it is given, in the format of
/// [`flash_attn_params::for_each_kernel_entry_of_shard!`]; each shard crate under `shards/`
/// passes it its part of the list. [`Variant::Dense`](flash_attn_params::Variant::Dense)
/// entries take [`ForwardParams`], [`Variant::Serving`](flash_attn_params::Variant::Serving)
/// and [`Variant::Paged`](flash_attn_params::Variant::Paged) ones [`ServingParams`],
/// [`Variant::Modified`](flash_attn_params::Variant::Modified),
/// [`Variant::Alibi`](flash_attn_params::Variant::Alibi) and
/// [`Variant::Softcap`](flash_attn_params::Variant::Softcap) ones [`ModifiedParams`], the
/// modified serving and paged ones [`ModifiedServingParams`]; a
/// variant the main loops do not implement fails to compile here.
#[macro_export]
macro_rules! forward_entries {
    ($(($entry:ident, $family:ident, $dtype:ident, $variant:ident, $block_m:literal, $block_n:literal, $warps:literal, $stages:literal, $head_dim:literal, $layout:ident, $q_source:ident)),* $(,)?) => {$(
        $crate::forward_entry!(
            $entry, $variant,
            ($family, $dtype, $block_m, $block_n, $warps, $stages, $head_dim, $layout, $q_source)
        );
    )*};
}

/// One entry of [`forward_entries!`]: one arm per variant, for its parameter type.
#[doc(hidden)]
#[macro_export]
macro_rules! forward_entry {
    // The sm90 family's entries take the Q, K and V tensor maps besides their parameters
    // (`KernelSpec::takes_tensor_maps`: these arms are that rule).
    ($entry:ident, Dense, (Sm90, $($axes:tt)*)) => {
        $crate::sm90_entry!(
            $entry,
            Dense,
            (false, false, false, false, false),
            params: $crate::ForwardParams,
            &params,
            &$crate::SequenceParams::DENSE,
            &$crate::ModifierParams::NONE,
            ($($axes)*)
        );
    };
    ($entry:ident, Modified, (Sm90, $($axes:tt)*)) => {
        $crate::sm90_entry!(
            $entry,
            Modified,
            (false, false, true, false, false),
            params: $crate::ModifiedParams,
            &params.forward,
            &$crate::SequenceParams::DENSE,
            &params.modifiers,
            ($($axes)*)
        );
    };
    ($entry:ident, Alibi, (Sm90, $($axes:tt)*)) => {
        $crate::sm90_entry!(
            $entry,
            Alibi,
            (false, false, false, true, false),
            params: $crate::ModifiedParams,
            &params.forward,
            &$crate::SequenceParams::DENSE,
            &params.modifiers,
            ($($axes)*)
        );
    };
    ($entry:ident, Softcap, (Sm90, $($axes:tt)*)) => {
        $crate::sm90_entry!(
            $entry,
            Softcap,
            (false, false, false, false, true),
            params: $crate::ModifiedParams,
            &params.forward,
            &$crate::SequenceParams::DENSE,
            &params.modifiers,
            ($($axes)*)
        );
    };
    ($entry:ident, Serving, (Sm90, $($axes:tt)*)) => {
        $crate::sm90_entry!(
            $entry,
            Serving,
            (true, false, false, false, false),
            params: $crate::ServingParams,
            &params.forward,
            &params.sequences,
            &$crate::ModifierParams::NONE,
            ($($axes)*)
        );
    };
    ($entry:ident, Paged, (Sm90, $($axes:tt)*)) => {
        $crate::sm90_entry!(
            $entry,
            Paged,
            (true, true, false, false, false),
            params: $crate::ServingParams,
            &params.forward,
            &params.sequences,
            &$crate::ModifierParams::NONE,
            ($($axes)*)
        );
    };
    ($entry:ident, Dense, $axes:tt) => {
        /// A forward kernel entry point; see its family's main loop for the launch contract.
        ///
        /// # Safety
        /// As for its family's main loop.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $entry(params: $crate::ForwardParams) {
            $crate::main_loop!(
                $axes,
                Dense,
                (false, false, false, false, false),
                &params,
                &$crate::SequenceParams::DENSE,
                &$crate::ModifierParams::NONE
            );
        }
    };
    ($entry:ident, Serving, $axes:tt) => {
        /// A serving kernel entry point; see its family's main loop for the launch contract.
        ///
        /// # Safety
        /// As for its family's main loop.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $entry(params: $crate::ServingParams) {
            $crate::main_loop!(
                $axes,
                Serving,
                (true, false, false, false, false),
                &params.forward,
                &params.sequences,
                &$crate::ModifierParams::NONE
            );
        }
    };
    ($entry:ident, Paged, $axes:tt) => {
        /// A paged serving kernel entry point; see its family's main loop for the launch
        /// contract.
        ///
        /// # Safety
        /// As for its family's main loop.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $entry(params: $crate::ServingParams) {
            $crate::main_loop!(
                $axes,
                Paged,
                (true, true, false, false, false),
                &params.forward,
                &params.sequences,
                &$crate::ModifierParams::NONE
            );
        }
    };
    ($entry:ident, Modified, $axes:tt) => {
        /// A forward kernel entry point with the score modifiers (window, softcap, ALiBi); see
        /// its family's main loop for the launch contract.
        ///
        /// # Safety
        /// As for its family's main loop.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $entry(params: $crate::ModifiedParams) {
            $crate::main_loop!(
                $axes,
                Modified,
                (false, false, true, false, false),
                &params.forward,
                &$crate::SequenceParams::DENSE,
                &params.modifiers
            );
        }
    };
    ($entry:ident, ServingModified, $axes:tt) => {
        /// A serving kernel entry point with the score modifiers; see its family's main loop
        /// for the launch contract.
        ///
        /// # Safety
        /// As for its family's main loop.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $entry(params: $crate::ModifiedServingParams) {
            $crate::main_loop!(
                $axes,
                ServingModified,
                (true, false, true, false, false),
                &params.forward,
                &params.sequences,
                &params.modifiers
            );
        }
    };
    ($entry:ident, PagedModified, $axes:tt) => {
        /// A paged serving kernel entry point with the score modifiers; see its family's main
        /// loop for the launch contract.
        ///
        /// # Safety
        /// As for its family's main loop.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $entry(params: $crate::ModifiedServingParams) {
            $crate::main_loop!(
                $axes,
                PagedModified,
                (true, true, true, false, false),
                &params.forward,
                &params.sequences,
                &params.modifiers
            );
        }
    };
}

/// The call of a family's main loop ([`flash_attn_params::Family`]) on `$params`, specialised
/// for one element type, tile and variant (`$variant`, and its switches `($serving, $paged,
/// $modified, $alibi, $softcap)`): one arm per family, so a family without a main loop (or a
/// variant its loop lacks: the sm80 loop has no `$alibi` or `$softcap`) fails to compile here.
/// An sm90 entry of [`forward_entry!`]: its parameters `$params` of type `$ty`, then the K and
/// V tensor maps, whose generic address it passes to the main loop.
#[doc(hidden)]
#[macro_export]
macro_rules! sm90_entry {
    ($entry:ident, $variant:ident, $switches:tt, $params:ident: $ty:ty, $forward:expr, $sequences:expr, $modifiers:expr, ($($axes:tt)*)) => {
        /// A forward kernel entry point of the sm90 family, which takes the Q, K and V tensor
        /// maps besides its parameters; see its main loop for the launch contract.
        ///
        /// # Safety
        /// As for its family's main loop; `_tensor_maps` holds the tensor maps of the Q, K and V
        /// that the parameters name where the kernel copies by TMA (`KernelSpec::copies_by_tma`).
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $entry(
            $params: $ty,
            _tensor_maps: $crate::fwd::sm90::TensorMaps,
        ) {
            // The generic address of the maps' parameter (`sym` names the entry's own
            // parameter), which TMA reads in place: a Rust reference to it would copy it to
            // local memory.
            let tensor_maps: u64;
            core::arch::asm!(
                "mov.u64 {maps}, {entry}_param_1;",
                "cvta.param.u64 {maps}, {maps};",
                maps = out(reg64) tensor_maps,
                entry = sym $entry,
                options(nostack, nomem, pure),
            );
            $crate::main_loop!(
                (Sm90, $($axes)*),
                $variant,
                $switches,
                $forward,
                $sequences,
                $modifiers,
                tensor_maps
            );
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! main_loop {
    ((Sm80, $dtype:ident, $block_m:literal, $block_n:literal, $warps:literal, $stages:literal, $head_dim:literal, $layout:ident, $q_source:ident), $variant:ident, ($serving:literal, $paged:literal, $modified:literal, false, false), $params:expr, $sequences:expr, $modifiers:expr) => {
        $crate::fwd::sm80::forward::<
            $crate::mma::MmaSync<$crate::element::$dtype>,
            $crate::shared_tile!($layout, $head_dim),
            $block_m,
            $block_n,
            $warps,
            $stages,
            $head_dim,
            { matches!($crate::QSource::$q_source, $crate::QSource::Registers) },
            { $block_m / (16 * $warps) },
            { $block_n / 16 },
            { $head_dim / 16 },
            $serving,
            $paged,
            $modified,
            {
                $crate::built_spec!(
                    Sm80, $dtype, $variant, $block_m, $block_n, $warps, $stages, $head_dim,
                    $layout, $q_source
                )
                .pads_head_dim()
            },
        >($params, $sequences, $modifiers)
    };
    // The sm90 loop has the dense, the serving, the paged, the modified and the
    // single-modifier variants, and the address of the K and V tensor maps.
    ((Sm90, $dtype:ident, $block_m:literal, $block_n:literal, $warps:literal, $stages:literal, $head_dim:literal, $layout:ident, $q_source:ident), $variant:ident, ($serving:literal, $paged:literal, $modified:literal, $alibi:literal, $softcap:literal), $params:expr, $sequences:expr, $modifiers:expr, $tensor_maps:expr) => {
        $crate::fwd::sm90::forward::<
            $crate::element::$dtype,
            $block_m,
            $block_n,
            $warps,
            { $crate::copy_warps($block_m, $warps) },
            $stages,
            $head_dim,
            { $block_n / 16 },
            { $head_dim / 16 },
            { $crate::sm90_overlaps_blocks($head_dim, $stages) },
            $modified,
            $alibi,
            $softcap,
            {
                $crate::built_spec!(
                    Sm90, $dtype, $variant, $block_m, $block_n, $warps, $stages, $head_dim,
                    $layout, $q_source
                )
                .pads_head_dim()
            },
            $serving,
            $paged,
            {
                $crate::sm90_register_split(
                    $block_m,
                    $crate::sm90_producer_registers(
                        $crate::Variant::$variant,
                        &$crate::TileConfig::sm90($block_m, $block_n, $warps, $stages, $head_dim),
                    ),
                )
                .0
            },
            {
                $crate::sm90_register_split(
                    $block_m,
                    $crate::sm90_producer_registers(
                        $crate::Variant::$variant,
                        &$crate::TileConfig::sm90($block_m, $block_n, $warps, $stages, $head_dim),
                    ),
                )
                .1
            },
            { 2 * $block_m as u32 },
            $crate::fwd::sm90::TurnsOf<$block_m>,
        >($params, $sequences, $modifiers, $tensor_maps)
    };
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // Unreachable by construction (no indexing or arithmetic can fail after the const checks);
    // a trap makes any bug loud instead of a hang.
    // SAFETY: `trap` aborts the kernel; nothing runs after it.
    unsafe { core::arch::nvptx::trap() }
}
