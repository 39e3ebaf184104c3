//! The cubins the build assembles with ptxas, and how loading picks between them and the PTX.
//!
//! Where the build found no ptxas, the table is empty and the tests say so and pass, unless
//! `FLASH_ATTN_REQUIRE_PTXAS` is set (CI sets it, with `PTXAS`, for the build too).

use flash_attn::{
    architecture_named, architectures_of, default_api_kernels, Architecture, Family, ForwardKernel,
    LoadOptions, PtxReason, CUBINS, CUBINS_NOT_BUILT, FORWARD_KERNELS,
};

/// The architectures the build assembles `kernel`'s cubins for: those of its family marked for
/// cubins (sm_89 and sm_90 for the sm80 family, sm_90a for the sm90 one).
fn cubin_architectures(kernel: &ForwardKernel) -> impl Iterator<Item = &'static Architecture> {
    architectures_of(kernel.spec.family).filter(|arch| arch.cubins)
}

/// `false`, after saying why, where the build embedded no cubins; fails instead if ptxas is
/// required.
fn cubins_were_built() -> bool {
    let Some(reason) = CUBINS_NOT_BUILT else {
        return true;
    };
    assert!(CUBINS.is_empty(), "no cubins built, yet the table has some");
    assert!(
        std::env::var_os("FLASH_ATTN_REQUIRE_PTXAS").is_none(),
        "FLASH_ATTN_REQUIRE_PTXAS is set but the build embedded no cubins: {reason}. \
         Build with PTXAS=/path/to/ptxas (the build script reruns when PTXAS changes)."
    );
    eprintln!("skipping the cubin checks: the build embedded none ({reason})");
    false
}

/// Cubins exist for every kernel the default API can run (all exposed kernels with
/// `FLASH_ATTN_CUBINS=all` at build time), one per architecture of its family, each an image
/// of its entry.
#[test]
fn the_build_embedded_a_cubin_per_default_kernel_and_architecture() {
    if !cubins_were_built() {
        return;
    }
    let assembled: Vec<&ForwardKernel> = FORWARD_KERNELS
        .iter()
        .filter(|kernel| CUBINS.iter().any(|cubin| cubin.entry == kernel.entry))
        .collect();
    assert_eq!(
        CUBINS.len(),
        assembled
            .iter()
            .map(|kernel| cubin_architectures(kernel).count())
            .sum::<usize>(),
        "one cubin per (entry, architecture of its family)"
    );
    for kernel in default_api_kernels() {
        assert!(assembled.contains(&kernel), "no cubin for {}", kernel.entry);
    }
    for kernel in assembled {
        for arch in cubin_architectures(kernel) {
            let matching: Vec<_> = CUBINS
                .iter()
                .filter(|cubin| cubin.entry == kernel.entry && cubin.arch == arch.name)
                .collect();
            assert_eq!(matching.len(), 1, "{} for {}", kernel.entry, arch.name);
            let cubin = matching[0];
            assert_eq!(cubin.compute_capability, arch.compute_capability);
            let image = cubin.image;
            let what = format!("{} for {}", kernel.entry, arch.name);
            assert!(image.len() > 64, "{what}: a {}-byte image", image.len());
            // A 64-bit little-endian ELF for NVIDIA CUDA: class 2, data 1, OS ABI 0x33, and
            // machine EM_CUDA (190).
            assert_eq!(&image[..4], b"\x7fELF", "{what}: no ELF magic");
            assert_eq!((image[4], image[5], image[7]), (2, 1, 0x33), "{what}");
            assert_eq!(u16::from_le_bytes([image[18], image[19]]), 190, "{what}");
            // CUDA ELF ABI version 7 (what ptxas 12 writes for these targets) keeps the SM in
            // the low byte of e_flags: the image was assembled for the architecture it is
            // filed under.
            if image[8] == 7 {
                let sm = u32::from_le_bytes(image[48..52].try_into().unwrap()) & 0xff;
                let (major, minor) = cubin.compute_capability;
                assert_eq!(sm as i32, major * 10 + minor, "{what}: e_flags SM");
            }
            // The entry's own module was assembled: its symbol is in the image.
            assert!(
                image
                    .windows(kernel.entry.len())
                    .any(|window| window == kernel.entry.as_bytes()),
                "{what}: the image does not name its entry"
            );
            // No other entry is in it (one module per entry); names that are part of this
            // one's (`..._s3` of `..._s3_pad`) cannot be told apart this way.
            for other in default_api_kernels()
                .into_iter()
                .filter(|other| !kernel.entry.contains(other.entry))
            {
                assert!(
                    !image
                        .windows(other.entry.len())
                        .any(|window| window == other.entry.as_bytes()),
                    "{what}: the image also holds {}",
                    other.entry
                );
            }
        }
    }
}

#[test]
fn loading_picks_the_cubin_of_the_exact_compute_capability() {
    let default = LoadOptions::default();
    assert_eq!(
        default,
        LoadOptions {
            device: 0,
            force_ptx: false,
            ptx_target: None,
        }
    );
    // The cubins are assembled from the device's own PTX target of the kernel's family; a forced
    // target that is that one changes nothing, and one of the other family serves none of this
    // kernel's. The sm80 family's one PTX target, sm_80, is the device's own on every device
    // (an sm_89 PTX, a second target, was the same instructions: BENCHMARKS.md log 55).
    let on_sm80 = LoadOptions {
        ptx_target: Some(*architecture_named("sm_80").unwrap()),
        ..LoadOptions::default()
    };
    let on_sm90a = LoadOptions {
        ptx_target: Some(*architecture_named("sm_90a").unwrap()),
        ..LoadOptions::default()
    };
    for kernel in FORWARD_KERNELS {
        for compute_capability in [(8, 9), (9, 0)] {
            let picked = |options: &LoadOptions| {
                options
                    .cubin_for(kernel.entry, compute_capability)
                    .map(|cubin| (cubin.entry, cubin.arch))
            };
            assert_eq!(picked(&on_sm80), picked(&default), "{}", kernel.entry);
            if kernel.spec.family == Family::Sm80 {
                assert_eq!(picked(&on_sm90a), picked(&default), "{}", kernel.entry);
            }
        }
    }
    let forced = LoadOptions {
        force_ptx: true,
        ..LoadOptions::default()
    };
    let built = cubins_were_built();
    for kernel in FORWARD_KERNELS {
        for compute_capability in [(8, 9), (9, 0), (8, 6)] {
            assert_eq!(
                forced.cubin_for(kernel.entry, compute_capability).err(),
                Some(PtxReason::Forced)
            );
        }
        if !built {
            assert_eq!(
                default.cubin_for(kernel.entry, (9, 0)).err(),
                Some(PtxReason::NotBuilt)
            );
            continue;
        }
        if !CUBINS.iter().any(|cubin| cubin.entry == kernel.entry) {
            assert_eq!(
                default.cubin_for(kernel.entry, (9, 0)).err(),
                Some(PtxReason::NotAssembled)
            );
            continue;
        }
        for arch in cubin_architectures(kernel) {
            let cubin = default
                .cubin_for(kernel.entry, arch.compute_capability)
                .unwrap_or_else(|reason| panic!("{} on {}: {reason:?}", kernel.entry, arch.name));
            assert_eq!((cubin.entry, cubin.arch), (kernel.entry, arch.name));
        }
        // No cubin runs elsewhere: sm_89 code is not loaded on 8.6 or 8.0, nor sm_90 code on
        // a 10.0 device; their kernels go through the PTX.
        for compute_capability in [(8, 0), (8, 6), (10, 0), (12, 0)] {
            assert_eq!(
                default.cubin_for(kernel.entry, compute_capability).err(),
                Some(PtxReason::OtherArchitecture),
                "{} on {compute_capability:?}",
                kernel.entry
            );
        }
    }
}
