//! The PTX modules: one per exposed kernel, each a complete module with its entry alone.

use flash_attn::{
    architectures_of, entry_ptx, entry_ptx_for, ptx_target_for, Family, ForwardParams,
    ModifiedParams, ModifiedServingParams, ServingParams, Variant, ARCHITECTURES, BUILT_CONFIGS,
    FORWARD_KERNELS, PTX_TARGETS, TENSOR_MAPS_BYTES,
};
use flash_attn_tools::gate::BUILD_PTX_DIR;

#[test]
fn every_module_targets_its_familys_ptx_and_holds_its_entry_alone_taking_its_params_by_value() {
    for kernel in FORWARD_KERNELS {
        // Dense entries take `ForwardParams`, serving entries `ServingParams`, modified ones
        // `ModifiedParams`, modified serving ones `ModifiedServingParams`.
        let variant = kernel.spec.variant;
        let size = if variant.is_serving() && variant.is_modified() {
            std::mem::size_of::<ModifiedServingParams>()
        } else if variant.is_serving() {
            std::mem::size_of::<ServingParams>()
        } else if variant.is_modified() {
            std::mem::size_of::<ModifiedParams>()
        } else {
            std::mem::size_of::<ForwardParams>()
        };
        let ptx = entry_ptx(kernel.entry).unwrap();
        // The newest PTX target of its family: sm_80 for the sm80 family, sm_90a for the sm90.
        let newest = match kernel.spec.family {
            Family::Sm80 => "sm_80",
            Family::Sm90 => "sm_90a",
        };
        assert!(
            ptx.contains(&format!("\n.target {newest}\n")),
            "{}",
            kernel.entry
        );
        // The same entry for every PTX target of its family, each for its own target, and
        // none for the others'.
        let family_targets: Vec<&str> = architectures_of(kernel.spec.family)
            .filter(|arch| arch.ptx_target)
            .map(|arch| arch.name)
            .collect();
        assert_eq!(kernel.ptx_targets().collect::<Vec<_>>(), family_targets);
        for target in PTX_TARGETS {
            let Some(other) = entry_ptx_for(kernel.entry, target) else {
                assert!(!family_targets.contains(&target), "{}", kernel.entry);
                continue;
            };
            assert!(family_targets.contains(&target), "{}", kernel.entry);
            assert!(
                other.contains(&format!("\n.target {target}\n")),
                "{}",
                kernel.entry
            );
            assert_eq!(other.matches(".visible .entry").count(), 1);
        }
        assert!(ptx.contains("\n.address_size 64\n"), "{}", kernel.entry);
        assert!(ptx.starts_with("//") && ptx.contains(".version"));
        assert_eq!(
            ptx.matches(".visible .entry").count(),
            1,
            "{}",
            kernel.entry
        );
        // The sm90 entries take the K and V tensor maps besides, which the build declares
        // 64-byte aligned, as TMA reads them.
        let tensor_maps = if kernel.spec.takes_tensor_maps() {
            format!(
                ",\n\t.param .align 64 .b8 {entry}_param_1[{TENSOR_MAPS_BYTES}]",
                entry = kernel.entry
            )
        } else {
            String::new()
        };
        let signature = format!(
            ".visible .entry {entry}(\n\t.param .align 8 .b8 {entry}_param_0[{size}]{tensor_maps}\n)",
            entry = kernel.entry
        );
        assert!(ptx.contains(&signature), "no entry {signature:?}");
        assert!(ptx.trim_end().ends_with('}'), "{}", kernel.entry);
        // A bounds check or panic path that survived optimisation would show up as an
        // unresolved call into core, which the driver rejects at load time.
        assert!(
            !ptx.contains(".extern .func"),
            "{} calls an external function",
            kernel.entry
        );
        assert!(
            !ptx.contains("call.uni"),
            "{} still calls a function",
            kernel.entry
        );
    }
    assert_eq!(entry_ptx("flash_fwd_no_such_kernel"), None);
}

#[test]
fn the_kernels_use_the_tensor_core_and_async_copy_instructions() {
    let mut missing: Vec<&str> = vec![
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
        "cvt.rn.bf16x2.f32",
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
        "cp.async.cg.shared.global",
        "cp.async.commit_group",
        "cp.async.wait_group",
        "ex2.approx.ftz.f32",
        "tanh.approx.f32",
        "st.global.v4.b32",
    ];
    for kernel in FORWARD_KERNELS {
        let ptx = entry_ptx(kernel.entry).unwrap();
        missing.retain(|instruction| !ptx.contains(instruction));
    }
    assert!(missing.is_empty(), "no kernel uses {missing:?}");
}

/// The build compiled one module per PTX target of its family and configuration of its set (the
/// shipping set, or with `FLASH_ATTN_KERNELS=all` every one that passes the compile-time
/// gates), exposed or not (the ptxas gate reads them), and no other.
#[test]
fn the_build_left_a_module_for_every_built_configuration_and_no_other() {
    for arch in ARCHITECTURES.iter().filter(|arch| arch.ptx_target) {
        let target = arch.name;
        let mut expected: Vec<String> = BUILT_CONFIGS
            .iter()
            .filter(|spec| spec.family == arch.family)
            .map(|spec| format!("{spec}.ptx"))
            .collect();
        expected.sort();
        // A target whose family has no entry in this build is not built at all.
        let mut found: Vec<String> =
            std::fs::read_dir(std::path::Path::new(BUILD_PTX_DIR).join(target))
                .into_iter()
                .flatten()
                .map(|entry| entry.unwrap().file_name().into_string().unwrap())
                .filter(|name| name.ends_with(".ptx"))
                .collect();
        found.sort();
        assert_eq!(found, expected, "{target}");
    }
}

/// The PTX targets are sm_80 for the sm80 family and sm_90a for the sm90 one. Every device of
/// compute capability 8.0 or later runs the sm80 family's sm_80 PTX (or the sm_89 and sm_90
/// cubins assembled from it); sm_90a is architecture-specific: only compute capability 9.0 runs
/// it.
#[test]
fn each_device_runs_the_newest_ptx_target_of_each_family_it_can() {
    assert_eq!(PTX_TARGETS, ["sm_80", "sm_90a"]);
    let target = |family, cc| ptx_target_for(family, cc).map(|arch| arch.name);
    for (compute_capability, sm80, sm90) in [
        ((7, 5), None, None),
        ((8, 0), Some("sm_80"), None),
        ((8, 6), Some("sm_80"), None),
        ((8, 7), Some("sm_80"), None),
        ((8, 9), Some("sm_80"), None),
        ((9, 0), Some("sm_80"), Some("sm_90a")),
        ((10, 0), Some("sm_80"), None),
        ((12, 0), Some("sm_80"), None),
    ] {
        assert_eq!(
            target(Family::Sm80, compute_capability),
            sm80,
            "{compute_capability:?}"
        );
        assert_eq!(
            target(Family::Sm90, compute_capability),
            sm90,
            "{compute_capability:?}"
        );
        for kernel in FORWARD_KERNELS {
            let runs = match kernel.spec.family {
                Family::Sm80 => sm80.is_some(),
                Family::Sm90 => sm90.is_some(),
            };
            assert_eq!(kernel.runs_on(compute_capability), runs, "{}", kernel.entry);
        }
    }
    assert_eq!(entry_ptx_for("flash_fwd_no_such_kernel", "sm_80"), None);
    assert_eq!(entry_ptx_for(FORWARD_KERNELS[0].entry, "sm_90"), None);
    assert_eq!(entry_ptx_for(FORWARD_KERNELS[0].entry, "sm_90a"), None);
}

/// A plain problem pays nothing for the score modifiers: only the modified kernels carry their
/// code (the softcap's `tanh` standing for it, which the softcap kernels carry too), the dense
/// and serving ones are compiled without, and so are the ALiBi kernels, which have ALiBi
/// alone.
#[test]
fn only_the_modified_kernels_carry_the_modifiers() {
    for kernel in FORWARD_KERNELS {
        let ptx = entry_ptx(kernel.entry).unwrap();
        let variant = kernel.spec.variant;
        assert_eq!(
            ptx.contains("tanh.approx.f32"),
            variant.is_modified() && variant != Variant::Alibi,
            "{}",
            kernel.entry
        );
    }
}
