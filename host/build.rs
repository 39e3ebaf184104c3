//! Compiles `kernels-gpu` to PTX with rustc's nvptx64 backend and hands the file to the crate.
//!
//! This is the project's own equivalent of cuda_builder (see `../shared/TOOLCHAIN.md` for why
//! rustc_codegen_nvvm is not used). The inner cargo uses its own target directory, so it never
//! waits on the outer build's lock.
//!
//! Where `ptxas` is found, it then assembles every entry, one module each, into a cubin for
//! sm_89 and one for sm_90, and writes `cubins.rs`, the table `src/kernels.rs` includes: a
//! device of exactly those compute capabilities loads the cubin and skips the driver's JIT.
//! Without ptxas the table is empty and every kernel is JIT-compiled from its PTX.

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

// Shared with the crate (std only), so that the ptxas lookup and the per-entry split of the PTX
// have one implementation: the modules assembled here are the ones the crate JIT-compiles.
#[path = "src/ptx_tools.rs"]
mod ptx_tools;

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
    let ptx_copy = out_dir.join("flash_attn_kernels.ptx");
    std::fs::copy(&ptx, &ptx_copy).unwrap_or_else(|error| {
        panic!("the kernel build left no PTX at {}: {error}", ptx.display())
    });
    let ptx = std::fs::read_to_string(&ptx_copy).expect("the PTX was just copied");
    build_cubins(&ptx, &out_dir);
}

/// The architectures cubins are assembled for, with the one compute capability each loads on.
const CUBIN_ARCHITECTURES: [(&str, (i32, i32)); 2] = [("sm_89", (8, 9)), ("sm_90", (9, 0))];

/// Assembles every entry of `ptx` for each of [`CUBIN_ARCHITECTURES`] into `out_dir/cubins/`,
/// in parallel, and writes the table `out_dir/cubins.rs`; an empty one, with a warning, where
/// there is no ptxas. Panics if ptxas rejects an entry: a kernel that does not assemble is a bug.
fn build_cubins(ptx: &str, out_dir: &Path) {
    // ptxas comes from $PTXAS, PATH or /usr/local/cuda/bin. Only PTXAS is watched: PATH
    // differs between shells, IDEs and rustup's proxies, and every rerun of this script costs
    // the ptxas step again (seconds), so a ptxas that appears on PATH later is picked up at
    // the next rerun for another reason (`touch host/build.rs`, `cargo clean`, or set PTXAS).
    println!("cargo:rerun-if-env-changed=PTXAS");
    let table_path = out_dir.join("cubins.rs");
    let Some(ptxas) = ptx_tools::find_ptxas() else {
        let reason = "no ptxas found (PTXAS unset, none on PATH or in /usr/local/cuda/bin)";
        println!(
            "cargo:warning=cubins were not built: {reason}; every kernel will be JIT-compiled \
             from its PTX when first loaded. Set PTXAS=/path/to/ptxas to build them."
        );
        write_table(&table_path, &[], Some(reason));
        return;
    };
    if !ptxas.is_file() {
        panic!(
            "PTXAS={} is not a file: point it at NVIDIA's ptxas, or unset it to build without cubins",
            ptxas.display()
        );
    }
    // A different ptxas at the same path (an upgrade) must reassemble.
    println!("cargo:rerun-if-changed={}", ptxas.display());

    let cubin_dir = out_dir.join("cubins");
    // Leftovers of entries that no longer exist must not linger next to the new ones.
    let _ = std::fs::remove_dir_all(&cubin_dir);
    std::fs::create_dir_all(&cubin_dir)
        .unwrap_or_else(|error| panic!("cannot create {}: {error}", cubin_dir.display()));
    let mut jobs = Vec::new();
    for entry in ptx_tools::entry_names(ptx) {
        let module = ptx_tools::entry_module(ptx, entry)
            .unwrap_or_else(|| panic!("entry {entry} does not split out of the PTX"));
        let module_path = cubin_dir.join(format!("{entry}.ptx"));
        std::fs::write(&module_path, module)
            .unwrap_or_else(|error| panic!("cannot write {}: {error}", module_path.display()));
        for (arch, compute_capability) in CUBIN_ARCHITECTURES {
            let cubin = cubin_dir.join(format!("{entry}.{arch}.cubin"));
            jobs.push((entry, arch, compute_capability, module_path.clone(), cubin));
        }
    }
    if jobs.is_empty() {
        panic!("the kernel PTX has no `.visible .entry`: nothing to assemble");
    }

    // One ptxas process per job, at most as many at once as there are cores. ptxas runs each
    // job single-threaded, and the job list is 2 per entry.
    let start = Instant::now();
    let workers = std::thread::available_parallelism()
        .map_or(1, |cores| cores.get())
        .min(jobs.len());
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                while let Some((entry, arch, _, module, cubin)) =
                    jobs.get(next.fetch_add(1, Ordering::Relaxed))
                {
                    let output = Command::new(&ptxas)
                        .args(["-O3", &format!("-arch={arch}")])
                        .arg(module)
                        .arg("-o")
                        .arg(cubin)
                        .output();
                    let failure = match output {
                        Err(error) => Some(format!("could not run {}: {error}", ptxas.display())),
                        Ok(output) if !output.status.success() => Some(format!(
                            "{} ({}):\n{}{}",
                            output.status,
                            module.display(),
                            String::from_utf8_lossy(&output.stdout),
                            String::from_utf8_lossy(&output.stderr)
                        )),
                        Ok(_) => None,
                    };
                    if let Some(failure) = failure {
                        failures
                            .lock()
                            .unwrap_or_else(|poisoned| poisoned.into_inner())
                            .push(format!("{entry} for {arch}: {failure}"));
                    }
                }
            });
        }
    });
    let failures = failures
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if !failures.is_empty() {
        panic!(
            "ptxas ({}) failed to assemble {} of {} kernel cubins; a kernel that does not \
             assemble is a bug in kernels-gpu:\n{}",
            ptxas.display(),
            failures.len(),
            jobs.len(),
            failures.join("\n")
        );
    }
    // Lands in the build script's `stderr` file under target/: the cost of this step.
    eprintln!(
        "assembled {} cubins with {} in {:.1} s ({workers} at a time)",
        jobs.len(),
        ptxas.display(),
        start.elapsed().as_secs_f64()
    );
    let cubins: Vec<_> = jobs
        .iter()
        .map(|(entry, arch, compute_capability, _, cubin)| {
            (*entry, *arch, *compute_capability, cubin.as_path())
        })
        .collect();
    write_table(&table_path, &cubins, None);
}

/// Writes the `include!`d table of cubins: `(entry, arch, compute capability, image file)`.
fn write_table(path: &Path, cubins: &[(&str, &str, (i32, i32), &Path)], not_built: Option<&str>) {
    let mut table =
        String::from("// Generated by host/build.rs: the cubins assembled by ptxas.\n\n");
    let not_built = match not_built {
        Some(reason) => format!("Some({reason:?})"),
        None => "None".to_owned(),
    };
    writeln!(
        table,
        "/// Why the build embedded no cubins (no ptxas was found), or `None` where it did.\n\
         pub const CUBINS_NOT_BUILT: Option<&str> = {not_built};\n"
    )
    .unwrap();
    table.push_str(
        "/// Every kernel entry assembled ahead of time, for each architecture: empty where the\n\
         /// build found no ptxas ([`CUBINS_NOT_BUILT`] says why).\n\
         pub const CUBINS: &[Cubin] = &[\n",
    );
    for (entry, arch, (major, minor), image) in cubins {
        let image = image
            .to_str()
            .unwrap_or_else(|| panic!("OUT_DIR is not UTF-8: {}", image.display()));
        writeln!(
            table,
            "    Cubin {{ entry: {entry:?}, arch: {arch:?}, compute_capability: ({major}, {minor}), \
             image: include_bytes!({image:?}) }},"
        )
        .unwrap();
    }
    table.push_str("];\n");
    std::fs::write(path, table)
        .unwrap_or_else(|error| panic!("cannot write {}: {error}", path.display()));
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
