use flash_attn::{entry_ptx, ForwardParams, FORWARD_KERNELS, PTX};

#[test]
fn ptx_targets_sm89() {
    assert!(
        PTX.contains("\n.target sm_89\n"),
        "PTX does not target sm_89"
    );
    assert!(PTX.contains("\n.address_size 64\n"));
}

#[test]
fn ptx_uses_the_tensor_core_and_async_copy_instructions() {
    for instruction in [
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
        "cvt.rn.bf16x2.f32",
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
        "cp.async.cg.shared.global",
        "cp.async.commit_group",
        "cp.async.wait_group",
        "ex2.approx.ftz.f32",
        "st.global.v4.b32",
    ] {
        assert!(PTX.contains(instruction), "PTX lacks {instruction}");
    }
}

#[test]
fn every_listed_kernel_is_an_entry_taking_forward_params_by_value() {
    let size = std::mem::size_of::<ForwardParams>();
    for kernel in FORWARD_KERNELS {
        let signature = format!(
            ".visible .entry {entry}(\n\t.param .align 8 .b8 {entry}_param_0[{size}]\n)",
            entry = kernel.entry
        );
        assert!(
            PTX.contains(&signature),
            "no entry {signature:?} in the PTX"
        );
    }
    assert_eq!(
        PTX.matches(".visible .entry").count(),
        FORWARD_KERNELS.len()
    );
}

#[test]
fn ptx_calls_no_external_function() {
    // A bounds check or panic path that survived optimisation would show up as an unresolved
    // call into core, which the driver rejects at load time.
    assert!(
        !PTX.contains(".extern .func"),
        "the PTX calls an external function"
    );
    assert!(!PTX.contains("call.uni"), "the PTX still calls a function");
}

#[test]
fn every_entry_splits_into_a_module_of_its_own() {
    for kernel in FORWARD_KERNELS {
        let ptx = entry_ptx(kernel.entry).unwrap();
        assert!(ptx.starts_with("//") && ptx.contains(".version") && ptx.contains(".target"));
        assert_eq!(
            ptx.matches(".visible .entry").count(),
            1,
            "{}",
            kernel.entry
        );
        assert!(ptx.contains(&format!(".visible .entry {}(", kernel.entry)));
        assert!(ptx.trim_end().ends_with('}'));
        // Every entry's instructions are in its module: the modules together hold all of them.
        let body_start = ptx.find(".visible .entry").unwrap();
        assert!(PTX.contains(&ptx[body_start..]));
    }
    // No entry is left out: the module has exactly the listed entries.
    assert_eq!(
        PTX.matches(".visible .entry").count(),
        FORWARD_KERNELS.len()
    );
    assert_eq!(entry_ptx("flash_fwd_no_such_kernel"), None);
}
