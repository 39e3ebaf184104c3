//! Compiles `kernels-gpu` to PTX with rustc's nvptx64 backend and hands the file to the crate.
//!
//! This is the project's own equivalent of cuda_builder (see `../shared/TOOLCHAIN.md` for why
//! rustc_codegen_nvvm is not used). The inner cargo uses its own target directory, so it never
//! waits on the outer build's lock.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const NVPTX_TARGET: &str = "nvptx64-nvidia-cuda";
const PTX_TARGET_CPU: &str = "sm_89";
const INSTALL_HINT: &str =
    "run `rustup toolchain install --no-self-update` in the repository root (it reads rust-toolchain.toml)";

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let repository = manifest_dir
        .parent()
        .expect("host/ sits in the repository root");
    let kernels = repository.join("kernels-gpu");
    for watched in [
        kernels.join("src"),
        kernels.join("Cargo.toml"),
        repository.join("params/src"),
        repository.join("params/Cargo.toml"),
        repository.join("rust-toolchain.toml"),
    ] {
        println!("cargo:rerun-if-changed={}", watched.display());
    }

    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    check_toolchain(&rustc);

    // OUT_DIR is <target>/<profile>/build/<package>-<hash>/out: share one kernel build across
    // profiles so that `cargo test` and `cargo bench` don't each rebuild core for nvptx.
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    let kernel_target_dir = out_dir
        .ancestors()
        .nth(4)
        .unwrap_or(&out_dir)
        .join("kernels-gpu");

    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(&kernels)
        .args([
            "rustc",
            "--release",
            "-Zbuild-std=core",
            "--target",
            NVPTX_TARGET,
        ])
        .arg("--target-dir")
        .arg(&kernel_target_dir)
        .args(["--", "-C"])
        .arg(format!("target-cpu={PTX_TARGET_CPU}"))
        // The bitcode linker is not installable here; the PTX is complete after --emit=asm.
        .args(["--emit=asm", "-C", "linker=/bin/true"])
        // Fragment arrays are indexed by loop counters; fully unrolled they live in registers,
        // otherwise in local memory (the default threshold left a 336-byte stack frame).
        .args(["-C", "llvm-args=-unroll-threshold=1000"]);
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy();
        let inherited_from_outer_build = (key.starts_with("CARGO_") && key != "CARGO_HOME")
            || matches!(
                key.as_ref(),
                "RUSTC"
                    | "RUSTC_WRAPPER"
                    | "RUSTC_WORKSPACE_WRAPPER"
                    | "RUSTDOC"
                    | "RUSTFLAGS"
                    | "TARGET"
                    | "HOST"
                    | "OUT_DIR"
                    | "OPT_LEVEL"
                    | "PROFILE"
                    | "DEBUG"
                    | "NUM_JOBS"
                    | "RUSTC_LINKER"
            );
        if inherited_from_outer_build {
            command.env_remove(key.as_ref());
        }
    }
    let status = command.status().unwrap_or_else(|error| {
        panic!("could not run cargo to build the kernels: {error}; {INSTALL_HINT}")
    });
    if !status.success() {
        panic!("building kernels-gpu for {NVPTX_TARGET} failed ({status}); see the errors above");
    }

    let ptx = kernel_target_dir
        .join(NVPTX_TARGET)
        .join("release/deps/flash_attn_kernels.s");
    std::fs::copy(&ptx, out_dir.join("flash_attn_kernels.ptx")).unwrap_or_else(|error| {
        panic!("the kernel build left no PTX at {}: {error}", ptx.display())
    });
}

/// Fails with the exact command to run when the nightly toolchain or rust-src is missing:
/// `-Zbuild-std` needs both, and the errors cargo gives otherwise do not say so.
fn check_toolchain(rustc: &str) {
    let version = Command::new(rustc)
        .arg("-vV")
        .output()
        .ok()
        .map(|output| String::from_utf8_lossy(&output.stdout).into_owned())
        .unwrap_or_default();
    if !version.contains("nightly") {
        panic!(
            "the GPU kernels need the pinned nightly toolchain, but `{rustc} -vV` says:\n{version}\n{INSTALL_HINT}"
        );
    }
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .unwrap_or_default();
    let core_sources = Path::new(&sysroot).join("lib/rustlib/src/rust/library/core");
    if !core_sources.is_dir() {
        panic!(
            "rust-src is missing from {sysroot} (no {}); {INSTALL_HINT}, or `rustup component add rust-src`",
            core_sources.display()
        );
    }
}
