//! The build of the runtime's kernels, run by `host/build.rs`: compiles `kernels-gpu` to PTX
//! with rustc's nvptx64 backend, splits it into one module per entry, exposes the entries that
//! pass the ptxas gate and embeds their modules deflated, and assembles cubins.
//!
//! This is the project's own equivalent of cuda_builder: rustc_codegen_nvvm's published
//! releases need an LLVM 7 install and stop at compute_80, so the kernels are compiled by
//! rustc's own `nvptx64-nvidia-cuda` backend instead. The inner cargo uses its own target directory, so it never
//! waits on the outer build's lock. It builds the shard crates of `kernels-gpu/shards/` in
//! parallel; each entry's PTX is then split into a module of its own (`OUT_DIR/ptx/`).
//!
//! The runtime exposes the entries that pass the ptxas gate recorded in `ptxas-gate.tsv`
//! ([`crate::gate`] holds the rule) and embeds their modules deflated (`kernel_table.rs`).
//! Where `ptxas` is found, the build assembles the kernels the default API can run (every
//! exposed one with `FLASH_ATTN_CUBINS=all`) into a cubin for each of [`ARCHITECTURES`]
//! (`cubins.rs`): a device of exactly one of their compute capabilities loads the cubin and
//! skips the driver's JIT. Without ptxas the cubin table is empty and every kernel is
//! JIT-compiled from its PTX. The kernels the default API can run are those its data files
//! name, the dispatch table and the fallbacks, which the build also turns into the tables the
//! runtime includes ([`crate::dispatch`]).

use std::collections::{HashMap, HashSet};
use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use flash_attn_params::{
    architectures_of, ptx_target_for, Architecture, Family, KernelSpec, SpecArgs, ARCHITECTURES,
    BUILT_CONFIGS, KERNELS_ENV, KERNEL_SET, TENSOR_MAPS_BYTES,
};

use crate::dispatch::write_default_api_tables;
use crate::gate::{parse_gate_file, record_failures, Gate};
use crate::modules::{module_path, PTX_DIR_METADATA};
use crate::ptxas;

const NVPTX_TARGET: &str = "nvptx64-nvidia-cuda";
const INSTALL_HINT: &str =
    "run `rustup toolchain install --no-self-update` in the repository root (it reads \
     rust-toolchain.toml); a crate from a registry needs a nightly toolchain with the rust-src \
     component, as in the repository's rust-toolchain.toml";

/// The build script of the runtime crate (`host/build.rs`): builds the kernels and writes
/// `kernel_table.rs`, `cubins.rs`, `dispatch_table.rs` and `fallback_kernels.rs` into `OUT_DIR`
/// for the crate to `include!`.
pub fn build_kernels() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    // OUT_DIR is <target>/<profile>/build/<package>-<hash>/out: share one kernel build across
    // profiles so that `cargo test` and `cargo bench` don't each rebuild core for nvptx.
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    let kernel_target_dir = out_dir
        .ancestors()
        .nth(4)
        .unwrap_or(&out_dir)
        .join("kernels-gpu");
    let (kernels, kernel_target_dir) = kernel_workspace(&manifest_dir, &kernel_target_dir);
    // The kernel set (`flash_attn_params::KernelSet`): the inner cargo inherits the variable,
    // and params' build script reads it there as here.
    println!("cargo:rerun-if-env-changed={KERNELS_ENV}");

    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    check_toolchain(&rustc);

    // The nvptx builds ([`nvptx_builds`]): one for today's table, over the shard crates of
    // every family, each shard at its family's PTX target. A target whose family has no entry
    // in this build (the sm90 family in a shipping set that names none of its kernels) is
    // skipped.
    let start = Instant::now();
    let targets: Vec<&Architecture> = built_ptx_targets().collect();
    let builds: Vec<(Vec<&Architecture>, std::process::Child)> = nvptx_builds()
        .into_iter()
        .enumerate()
        .map(|(build, build_targets)| {
            let target_dir = nvptx_target_dir(&kernel_target_dir, build);
            let child = nvptx_build(&kernels, &target_dir, &build_targets)
                .spawn()
                .unwrap_or_else(|error| {
                    panic!("could not run cargo to build the kernels: {error}; {INSTALL_HINT}")
                });
            (build_targets, child)
        })
        .collect();
    for (build_targets, mut child) in builds {
        let names: Vec<&str> = build_targets.iter().map(|arch| arch.name).collect();
        let status = child.wait().unwrap_or_else(|error| {
            panic!("could not wait for the kernel build for {names:?}: {error}")
        });
        if !status.success() {
            panic!(
                "building kernels-gpu for {NVPTX_TARGET} ({names:?}) failed ({status}); see the \
                 errors above"
            );
        }
        // The linker would have written each shard's `.ptx`; `/bin/true` writes nothing, and
        // cargo, missing that output, rebuilt every shard (45 s) at each run of this script.
        // The `.s` is that PTX.
        for arch in build_targets {
            for shard in 0..arch.family.shards() {
                let asm = shard_ptx(&kernel_target_dir, arch, shard);
                let linked = asm.with_extension("ptx");
                std::fs::copy(&asm, &linked).unwrap_or_else(|error| {
                    panic!(
                        "cannot copy {} to {}: {error}",
                        asm.display(),
                        linked.display()
                    )
                });
            }
        }
    }
    eprintln!(
        "built the kernel shards ({} entries, {KERNEL_SET:?} set) for the PTX targets {:?} in \
         {:.1} s",
        BUILT_CONFIGS.len(),
        targets.iter().map(|arch| arch.name).collect::<Vec<_>>(),
        start.elapsed().as_secs_f64()
    );

    let start = Instant::now();
    let modules = split_entries(&kernel_target_dir, &out_dir);
    let gate_path = manifest_dir.join("ptxas-gate.tsv");
    println!("cargo:rerun-if-changed={}", gate_path.display());
    let gate = read_gate(&gate_path);
    let exposed = exposed_kernels(&modules, &gate);
    // The crate's own copy of the data files (`host/`'s in a checkout).
    let default_api_entries = write_default_api_tables(&manifest_dir, &out_dir);
    let wanted_cubins = cubin_entries(&default_api_entries, &exposed);
    let cubins = build_cubins(
        &out_dir,
        &kernel_target_dir.join("cubin-cache"),
        &wanted_cubins,
    );
    write_kernel_table(&out_dir, &exposed);
    // Where every built entry's module is, exposed or not, for the ptxas gate's measurement
    // (the tools and `cargo test`), on the machine that built the crate.
    println!("cargo:{PTX_DIR_METADATA}={}", utf8(&out_dir.join("ptx")));
    write_cubin_table(&out_dir.join("cubins.rs"), &cubins);
    eprintln!(
        "split, deflated, assembled and listed in {:.1} s",
        start.elapsed().as_secs_f64()
    );
}

/// The kernel workspace to build, its sources watched by cargo, and the target folder of its
/// builds.
///
/// In a checkout it is `kernels-gpu/` beside the runtime crate (`host/`), built in place. A
/// packaged runtime cannot hold the kernel crates as they are (cargo leaves a folder with a
/// `Cargo.toml` out of a package), so `host/kernels-gpu/` links to their sources with each
/// manifest as `Cargo.toml.in`, and the package holds those as files: the build stages them
/// under `kernel_target_dir/packaged/sources/`, manifests renamed, beside a copy of the
/// sources of the `flash-attn-params` the runtime depends on
/// (`DEP_FLASH_ATTN_PARAMS_SOURCE_DIR`), so that the kernels and the host agree on one
/// `ForwardParams`. Those builds get a target folder of their own: the staged crates have the
/// checkout's names and relative paths, so cargo would give them the same artifacts, and a
/// checkout's build and its `cargo package` would rebuild each other's kernels.
fn kernel_workspace(manifest_dir: &Path, kernel_target_dir: &Path) -> (PathBuf, PathBuf) {
    let repository = manifest_dir
        .parent()
        .expect("a crate's folder has a parent");
    let checkout = repository.join("kernels-gpu");
    if checkout.join("Cargo.toml").is_file() {
        for watched in [
            checkout.join("src"),
            checkout.join("Cargo.toml"),
            repository.join("params/src"),
            repository.join("params/build.rs"),
            repository.join("params/Cargo.toml"),
            repository.join("rust-toolchain.toml"),
        ] {
            println!("cargo:rerun-if-changed={}", watched.display());
        }
        return (checkout, kernel_target_dir.to_owned());
    }
    let packaged = manifest_dir.join("kernels-gpu");
    let params = env::var_os("DEP_FLASH_ATTN_PARAMS_SOURCE_DIR").map(PathBuf::from);
    let Some(params) = params.filter(|params| params.join("Cargo.toml").is_file()) else {
        panic!(
            "neither {} (a checkout) nor the sources of flash-attn-params \
             (DEP_FLASH_ATTN_PARAMS_SOURCE_DIR, from its build script) were found",
            checkout.display()
        );
    };
    for watched in [&packaged, &params] {
        println!("cargo:rerun-if-changed={}", watched.display());
    }
    let kernel_target_dir = kernel_target_dir.join("packaged");
    let sources = kernel_target_dir.join("sources");
    stage(&packaged, &sources.join("kernels-gpu"));
    stage(&params, &sources.join("params"));
    (sources.join("kernels-gpu"), kernel_target_dir)
}

/// Copies the tree at `from` to `to`, a file named `Cargo.toml.in` as `Cargo.toml`, leaving
/// out `target` folders. A file that already holds the same bytes is left as it is, so that
/// its time stamp does not rebuild the kernels; the others are replaced whole (written aside,
/// then renamed), so that a concurrent build never reads half a file.
fn stage(from: &Path, to: &Path) {
    let fail = |what: &str, path: &Path, error: std::io::Error| -> ! {
        panic!("cannot {what} {}: {error}", path.display())
    };
    std::fs::create_dir_all(to).unwrap_or_else(|error| fail("create", to, error));
    let entries = std::fs::read_dir(from).unwrap_or_else(|error| fail("read", from, error));
    for entry in entries {
        let entry = entry.unwrap_or_else(|error| fail("read", from, error));
        let source = entry.path();
        let name = entry.file_name();
        if source.is_dir() {
            if name != "target" {
                stage(&source, &to.join(&name));
            }
            continue;
        }
        let target = to.join(if name == "Cargo.toml.in" {
            "Cargo.toml".as_ref()
        } else {
            name.as_os_str()
        });
        let bytes = std::fs::read(&source).unwrap_or_else(|error| fail("read", &source, error));
        if std::fs::read(&target).is_ok_and(|old| old == bytes) {
            continue;
        }
        let aside = to.join(format!(
            ".{}.{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        std::fs::write(&aside, &bytes).unwrap_or_else(|error| fail("write", &aside, error));
        std::fs::rename(&aside, &target).unwrap_or_else(|error| fail("write", &target, error));
    }
}

/// The PTX targets of the architecture table ([`Architecture::ptx_target`]) whose family has
/// entries in this build ([`BUILT_CONFIGS`]), in table order.
fn built_ptx_targets() -> impl Iterator<Item = &'static Architecture> {
    ARCHITECTURES.iter().filter(|arch| {
        arch.ptx_target && BUILT_CONFIGS.iter().any(|spec| spec.family == arch.family)
    })
}

/// The PTX targets of `family`, in table order.
fn family_ptx_targets(family: Family) -> impl Iterator<Item = &'static Architecture> {
    architectures_of(family).filter(|arch| arch.ptx_target)
}

/// The PTX target whose PTX a device, or the cubins, of `arch` use: of `arch`'s family.
fn ptx_of_arch(arch: &Architecture) -> &'static Architecture {
    ptx_target_for(arch.family, arch.compute_capability)
        .expect("each family's oldest architecture is a PTX target")
}

/// The package name of shard `shard` of `family`'s shard crates (`kernels-gpu/shards/`).
fn shard_package(family: Family, shard: usize) -> String {
    format!("flash-attn-kernels-{}{shard}", family.shard_dir_prefix())
}

/// The nvptx builds, each a list of PTX targets of distinct families: build `n` compiles the
/// `n`-th PTX target of each family with entries in this build (in table order), its shards
/// each at their family's target. A crate compiles for one `-Ctarget-cpu` in one build, so a
/// family with two PTX targets needs two builds; families share one, and with it one build of
/// `core` and `compiler_builtins`. One build where there had been one per family (the shards'
/// PTX the same byte for byte) took the cold `cargo build --workspace` from 179-212 s to
/// 144-156 s on two cores, its CPU time from 345-378 s to 285 s (BENCHMARKS.md log 71).
fn nvptx_builds() -> Vec<Vec<&'static Architecture>> {
    let mut builds: Vec<Vec<&'static Architecture>> = Vec::new();
    for arch in built_ptx_targets() {
        let build = nvptx_build_of(arch);
        if builds.len() <= build {
            builds.resize_with(build + 1, Vec::new);
        }
        builds[build].push(arch);
    }
    builds
}

/// Which of [`nvptx_builds`] compiles the PTX target `arch`: its place among its family's.
fn nvptx_build_of(arch: &Architecture) -> usize {
    family_ptx_targets(arch.family)
        .position(|target| target.name == arch.name)
        .expect("only a PTX target is built")
}

/// The target directory of nvptx build `build` ([`nvptx_builds`]).
fn nvptx_target_dir(kernel_target_dir: &Path, build: usize) -> PathBuf {
    kernel_target_dir.join(format!("nvptx-{build}"))
}

/// The PTX of shard `shard` of `arch`'s family, as the nvptx build for `arch` left it.
fn shard_ptx(kernel_target_dir: &Path, arch: &Architecture, shard: usize) -> PathBuf {
    let library = shard_package(arch.family, shard).replace('-', "_");
    nvptx_target_dir(kernel_target_dir, nvptx_build_of(arch))
        .join(NVPTX_TARGET)
        .join(format!("release/deps/{library}.s"))
}

/// The inner cargo that compiles the shard crates of each of `targets`' families in `kernels`
/// to PTX for that target, into `target_dir`.
fn nvptx_build(kernels: &Path, target_dir: &Path, targets: &[&Architecture]) -> Command {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command.current_dir(kernels).args([
        "build",
        "--release",
        "-Zbuild-std=core",
        // Each shard's `-Ctarget-cpu` as its package's profile rustflags, below.
        "-Zprofile-rustflags",
        "--target",
        NVPTX_TARGET,
    ]);
    for arch in targets {
        for shard in 0..arch.family.shards() {
            let package = shard_package(arch.family, shard);
            command.args(["-p", &package]).arg("--config").arg(format!(
                "profile.release.package.{package}.rustflags=[\"-Ctarget-cpu={}\"]",
                arch.name
            ));
        }
    }
    command
        .arg("--target-dir")
        .arg(target_dir)
        // RUSTFLAGS reach every crate of the nvptx build (core included, and no build script:
        // those are host artifacts); `core` and `compiler_builtins` compile at the target's
        // default CPU, which the shards' PTX does not see (their own code is in no PTX kept:
        // the shards take their MIR and compile it at their own target). Each crate writes
        // its PTX (`asm`) next to its library; the bitcode linker of the shards' cdylibs is
        // not installable here, and the PTX is complete without it.
        .env(
            "RUSTFLAGS",
            [
                "--emit=asm,link",
                "-Clinker=/bin/true",
                // Fragment arrays are indexed by loop counters; fully unrolled they live in
                // registers, otherwise in local memory (the default threshold left a 336-byte
                // stack frame).
                "-Cllvm-args=-unroll-threshold=1000",
            ]
            .join(" "),
        );
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy();
        let inherited_from_outer_build = (key.starts_with("CARGO_") && key != "CARGO_HOME")
            || matches!(
                key.as_ref(),
                "RUSTC"
                    | "RUSTC_WRAPPER"
                    | "RUSTC_WORKSPACE_WRAPPER"
                    | "RUSTDOC"
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
    command
}

/// A spec of [`BUILT_CONFIGS`]: the spec, its entry name, and the folder of its single-entry
/// PTX modules, one per PTX target ([`module_path`]).
struct EntryModule {
    spec: KernelSpec,
    entry: String,
    ptx_dir: PathBuf,
}

impl EntryModule {
    /// The module of this entry's PTX for the PTX target `arch`.
    fn path(&self, arch: &Architecture) -> PathBuf {
        module_path(&self.ptx_dir, arch.name, &self.entry)
    }
}

/// Splits every shard's PTX into one module per entry and PTX target of its family
/// (`OUT_DIR/ptx/<arch>/<entry>.ptx`), in the order of [`BUILT_CONFIGS`], and checks that the
/// entries of each target are exactly the specs of its family.
fn split_entries(kernel_target_dir: &Path, out_dir: &Path) -> Vec<EntryModule> {
    let modules_dir = out_dir.join("ptx");
    // Leftovers of entries that no longer exist must not linger next to the new ones.
    let _ = std::fs::remove_dir_all(&modules_dir);
    let modules: Vec<EntryModule> = BUILT_CONFIGS
        .iter()
        .map(|&spec| EntryModule {
            spec,
            entry: spec.to_string(),
            ptx_dir: modules_dir.clone(),
        })
        .collect();
    for arch in built_ptx_targets() {
        // Each built entry of the target's family and what its declaration gets.
        let expected: HashMap<String, EntryDeclaration> = modules
            .iter()
            .filter(|module| module.spec.family == arch.family)
            .map(|module| (module.entry.clone(), EntryDeclaration::of(&module.spec)))
            .collect();
        let arch_dir = modules_dir.join(arch.name);
        std::fs::create_dir_all(&arch_dir)
            .unwrap_or_else(|error| panic!("cannot create {}: {error}", arch_dir.display()));
        let mut written = HashSet::new();
        for shard in 0..arch.family.shards() {
            let path = shard_ptx(kernel_target_dir, arch, shard);
            let ptx = std::fs::read_to_string(&path).unwrap_or_else(|error| {
                panic!(
                    "the kernel build left no PTX at {}: {error}",
                    path.display()
                )
            });
            for (entry, module) in entry_modules(&ptx, |entry| expected.get(entry).copied()) {
                let module_path = module_path(&modules_dir, arch.name, entry);
                std::fs::write(&module_path, module).unwrap_or_else(|error| {
                    panic!("cannot write {}: {error}", module_path.display())
                });
                written.insert(entry.to_owned());
            }
        }
        let missing: Vec<&String> = expected
            .keys()
            .filter(|entry| !written.contains(*entry))
            .collect();
        let extra: Vec<&String> = written
            .iter()
            .filter(|entry| !expected.contains_key(*entry))
            .collect();
        if !missing.is_empty() || !extra.is_empty() {
            panic!(
                "the shards' PTX entries for {} differ from the built specs: missing \
                 {missing:?}, extra {extra:?}",
                arch.name,
            );
        }
    }
    modules
}

/// The committed gate file: the ptxas version and one record per entry.
fn read_gate(path: &Path) -> Gate {
    let text = std::fs::read_to_string(path).unwrap_or_else(|error| {
        panic!(
            "cannot read the ptxas gate file {}: {error}; write it with \
             `flash-attn-configs --write-gate host/ptxas-gate.tsv`",
            path.display()
        )
    });
    parse_gate_file(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// The entries the crate exposes: those built whose gate record passes. An entry without a record is not exposed, with a warning: it has not been gated.
fn exposed_kernels<'m>(modules: &'m [EntryModule], (_, records): &Gate) -> Vec<&'m EntryModule> {
    let mut exposed = Vec::new();
    let mut ungated = Vec::new();
    for module in modules {
        match records.iter().find(|record| record.entry == module.entry) {
            Some(record) if record_failures(&module.spec, record).is_empty() => {
                exposed.push(module)
            }
            Some(_) => {}
            None => ungated.push(module.entry.as_str()),
        }
    }
    if !ungated.is_empty() {
        println!(
            "cargo:warning={} entries have no record in host/ptxas-gate.tsv and are not exposed \
             (first: {}); regenerate it with `flash-attn-configs --write-gate host/ptxas-gate.tsv`",
            ungated.len(),
            ungated[0]
        );
    }
    exposed
}

/// The exposed entries to assemble into cubins. `FLASH_ATTN_CUBINS=all`: every one. Otherwise
/// the kernels the default API can run, `default_api_entries`: those the dispatch table and
/// the fallbacks name. The others are JIT-compiled from their PTX on first use (0.1-0.4 s each, cached by the driver):
/// ptxas takes ~0.4 s per entry and architecture, so cubins for all of them would more than
/// double the build.
fn cubin_entries<'m>(
    default_api_entries: &HashSet<String>,
    exposed: &[&'m EntryModule],
) -> Vec<&'m EntryModule> {
    println!("cargo:rerun-if-env-changed=FLASH_ATTN_CUBINS");
    if env::var("FLASH_ATTN_CUBINS").as_deref() == Ok("all") {
        return exposed.to_vec();
    }
    exposed
        .iter()
        .copied()
        .filter(|module| default_api_entries.contains(&module.entry))
        .collect()
}

/// Assembles `modules` into cubins for each architecture of their family marked for cubins
/// under `OUT_DIR/cubins/`, in parallel, and returns one [`BuiltCubin`] for each, or why none were
/// built (no ptxas, with a warning). Panics if ptxas rejects an entry: a kernel that
/// does not assemble is a bug.
fn build_cubins(
    out_dir: &Path,
    cache: &Path,
    modules: &[&EntryModule],
) -> Result<Vec<BuiltCubin>, String> {
    // ptxas comes from $PTXAS, PATH or /usr/local/cuda/bin. Only PTXAS is watched: PATH
    // differs between shells, IDEs and rustup's proxies, and every rerun of this script costs
    // the ptxas step again (seconds), so a ptxas that appears on PATH later is picked up at
    // the next rerun for another reason (`touch host/build.rs`, `cargo clean`, or set PTXAS).
    println!("cargo:rerun-if-env-changed=PTXAS");
    let Some(ptxas) = ptxas::find_ptxas() else {
        let reason = "no ptxas found (PTXAS unset, none on PATH or in /usr/local/cuda/bin)";
        println!(
            "cargo:warning=cubins were not built: {reason}; every kernel will be JIT-compiled \
             from its PTX when first loaded. Set PTXAS=/path/to/ptxas to build them."
        );
        return Err(reason.to_owned());
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
    // Leftovers of entries that are no longer built must not linger next to the new ones.
    let _ = std::fs::remove_dir_all(&cubin_dir);
    std::fs::create_dir_all(&cubin_dir)
        .unwrap_or_else(|error| panic!("cannot create {}: {error}", cubin_dir.display()));
    let jobs: Vec<BuiltCubin> = modules
        .iter()
        .flat_map(|module| {
            architectures_of(module.spec.family)
                .filter(|arch| arch.cubins)
                .map(|arch| BuiltCubin {
                    entry: module.entry.clone(),
                    arch: arch.name,
                    compute_capability: arch.compute_capability,
                    module: module.path(ptx_of_arch(arch)),
                    image: cubin_dir.join(format!("{}.{}.cubin", module.entry, arch.name)),
                })
        })
        .collect();
    // A module ptxas already assembled (same text, same ptxas, same architecture:
    // `ptxas::cache_file_name`) is taken from the cache in the kernel target directory: a rerun
    // of this script that changes no kernel (a new dispatch table, a touched file) then costs no
    // ptxas time.
    let version = ptxas::ptxas_version(&ptxas).unwrap_or_else(|error| panic!("{error}"));
    std::fs::create_dir_all(cache)
        .unwrap_or_else(|error| panic!("cannot create {}: {error}", cache.display()));
    let start = Instant::now();
    let failures: Vec<String> = ptxas::run_in_parallel(&jobs, |job| {
        let text = std::fs::read(&job.module).map_err(|error| error.to_string())?;
        let cached = cache.join(ptxas::cache_file_name(
            &job.entry, job.arch, &text, &version,
        ));
        if std::fs::copy(&cached, &job.image).is_ok() {
            return Ok(());
        }
        ptxas::assemble_module(&ptxas, job.arch, &job.module, &job.image)?;
        std::fs::copy(&job.image, &cached).map_err(|error| error.to_string())?;
        Ok(())
    })
    .into_iter()
    .filter_map(Result::err)
    .collect();
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
        "assembled {} cubins (or took them from the cache) with {} in {:.1} s",
        jobs.len(),
        ptxas.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(jobs)
}

/// One cubin the build assembled: its entry, architecture, source module and image file.
struct BuiltCubin {
    entry: String,
    arch: &'static str,
    compute_capability: (i32, i32),
    module: PathBuf,
    image: PathBuf,
}

/// Writes `kernel_table.rs`, which the runtime's `src/kernels.rs` includes: `FORWARD_KERNELS`
/// (the exposed entries) and their deflated PTX modules.
fn write_kernel_table(out_dir: &Path, exposed: &[&EntryModule]) {
    let mut table = String::from("// Generated by flash-attn-build.\n\n");
    table.push_str(
        "/// Every exposed forward kernel, in entry order: each spec this build compiled\n\
         /// ([`KERNEL_SET`](crate::KERNEL_SET)) that passes the ptxas gate\n\
         /// (`host/ptxas-gate.tsv`). A default build compiles the shipping set, the kernels the\n\
         /// dispatch table and the fallbacks name; one with `FLASH_ATTN_KERNELS=all` the search\n\
         /// space, every spec that passes the compile-time gates.\n\
         pub const FORWARD_KERNELS: &[ForwardKernel] = &[\n",
    );
    // One module per core at a time: 266 modules, 38 MB per PTX target, in the whole space.
    let jobs: Vec<(&EntryModule, &Architecture)> = exposed
        .iter()
        .flat_map(|&module| family_ptx_targets(module.spec.family).map(move |arch| (module, arch)))
        .collect();
    let deflated_paths = ptxas::run_in_parallel(&jobs, |(module, arch)| {
        let path = module.path(arch);
        let ptx = std::fs::read(&path).expect("the module was just written");
        let deflated = path.with_extension("ptx.deflate");
        std::fs::write(&deflated, miniz_oxide::deflate::compress_to_vec(&ptx, 6))
            .unwrap_or_else(|error| panic!("cannot write {}: {error}", deflated.display()));
        deflated
    });
    let mut deflated_modules = String::new();
    let mut deflated_paths = jobs.iter().zip(&deflated_paths);
    for (index, module) in exposed.iter().enumerate() {
        let per_target: Vec<String> = family_ptx_targets(module.spec.family)
            .map(|_| {
                let ((_, arch), path) = deflated_paths
                    .next()
                    .expect("one job per module and target");
                format!("({:?}, include_bytes!({:?}))", arch.name, utf8(path))
            })
            .collect();
        writeln!(deflated_modules, "    &[{}],", per_target.join(", ")).unwrap();
        writeln!(
            table,
            "    ForwardKernel {{ entry: {:?}, spec: flash_attn_params::built_spec!({}), index: {index} }},",
            module.entry,
            SpecArgs(module.spec)
        )
        .unwrap();
    }
    table.push_str("];\n\n");
    // A static, not in the `const` list: a const's data is emitted again in every codegen unit
    // that uses it: as a field of the list, the modules made flash-attn-load-time 15.5 MB, not 6.
    let all_targets: Vec<&str> = ARCHITECTURES
        .iter()
        .filter(|arch| arch.ptx_target)
        .map(|arch| arch.name)
        .collect();
    writeln!(
        table,
        "/// The deflated PTX modules of each of [`FORWARD_KERNELS`], by index: one per PTX\n\
         /// target of the kernel's family, `(target, module)`, in [`PTX_TARGETS`] order.\n\
         static DEFLATED_PTX: [&[(&str, &[u8])]; {}] = [\n{deflated_modules}];\n\n\
         /// The PTX targets of the architecture table, oldest first: each kernel has the PTX of\n\
         /// those of its family.\n\
         pub const PTX_TARGETS: [&str; {}] = {all_targets:?};\n",
        exposed.len(),
        all_targets.len(),
    )
    .unwrap();
    let path = out_dir.join("kernel_table.rs");
    std::fs::write(&path, table)
        .unwrap_or_else(|error| panic!("cannot write {}: {error}", path.display()));
}

/// Writes the `include!`d table of cubins, `(entry, arch, compute capability, image file)`, or
/// an empty one and the reason where none were built.
fn write_cubin_table(path: &Path, cubins: &Result<Vec<BuiltCubin>, String>) {
    let mut table =
        String::from("// Generated by flash-attn-build: the cubins assembled by ptxas.\n\n");
    let not_built = match cubins {
        Err(reason) => format!("Some({reason:?})"),
        Ok(_) => "None".to_owned(),
    };
    writeln!(
        table,
        "/// Why the build embedded no cubins (no ptxas was found), or `None` where it did.\n\
         pub const CUBINS_NOT_BUILT: Option<&str> = {not_built};\n"
    )
    .unwrap();
    table.push_str(
        "/// The kernels assembled ahead of time, for each architecture: by default those the\n\
         /// default API can run (`FLASH_ATTN_CUBINS=all` at build time: every exposed one);\n\
         /// empty where the build found no ptxas ([`CUBINS_NOT_BUILT`] says why).\n\
         pub static CUBINS: &[Cubin] = &[\n",
    );
    for cubin in cubins.iter().flatten() {
        let (major, minor) = cubin.compute_capability;
        writeln!(
            table,
            "    Cubin {{ entry: {:?}, arch: {:?}, compute_capability: ({}, {}), \
             image: include_bytes!({:?}) }},",
            cubin.entry,
            cubin.arch,
            major,
            minor,
            utf8(&cubin.image)
        )
        .unwrap();
    }
    table.push_str("];\n");
    std::fs::write(path, table)
        .unwrap_or_else(|error| panic!("cannot write {}: {error}", path.display()));
}

/// Every entry of `ptx` as a module of its own, in order: `(name, module)`, where the module is
/// everything before the first entry (version, target, the shared-memory declaration) plus that
/// entry's body. One pass over the text: a shard's PTX is 11 MB.
///
/// Two things in the text depend on which entries share the shard rather than on the entry: the
/// preamble's `// .globl` comment, which names the shard's first entry, is left out, and the
/// basic-block labels, `$L__BB<function index>_<block>`, are numbered as function 0. An entry's
/// module is then the same text in the shipping set and in the whole space, so the GPU runs of
/// a whole-space bundle cover the shipping build's modules byte for byte, and the PTX digests
/// of the ptxas gate hold for both.
///
/// Each entry's declaration also gets what `declaration(entry)` says (none for an entry that
/// is not a built spec, which the caller then rejects): its launch bounds
/// ([`with_launch_bounds`]) and the alignment of its tensor maps
/// ([`with_aligned_tensor_maps`]).
fn entry_modules(
    ptx: &str,
    declaration: impl Fn(&str) -> Option<EntryDeclaration>,
) -> Vec<(&str, String)> {
    const ENTRY: &str = ".visible .entry ";
    let Some(first) = ptx.find(ENTRY) else {
        return Vec::new();
    };
    let preamble: String = ptx[..first]
        .split_inclusive('\n')
        .filter(|line| !line.trim_start().starts_with("// .globl"))
        .collect();
    let mut modules = Vec::new();
    let mut rest = first;
    while let Some(offset) = ptx[rest..].find(ENTRY) {
        let start = rest + offset;
        let name_start = start + ENTRY.len();
        let name_end = name_start
            + ptx[name_start..]
                .find('(')
                .expect("an entry has parameters");
        // An entry's body ends at the first closing brace at the start of a line.
        let end = start + ptx[start..].find("\n}\n").expect("an entry has a body") + 3;
        let name = &ptx[name_start..name_end];
        let declaration = declaration(name);
        let body = with_launch_bounds(&labels_as_function_zero(&ptx[start..end]), declaration);
        let body = match declaration {
            Some(declaration) if declaration.takes_tensor_maps => {
                with_aligned_tensor_maps(&body, name)
            }
            _ => body,
        };
        modules.push((name, format!("{preamble}{body}")));
        rest = end;
    }
    modules
}

/// What the build adds to an entry's declaration: its launch bounds, its block size (the host
/// launches it with that, which is then also the most it accepts) and the blocks per SM ptxas
/// is to fit ([`KernelSpec::min_blocks_per_sm`]); and whether it takes tensor maps.
#[derive(Clone, Copy)]
struct EntryDeclaration {
    threads: usize,
    min_blocks_per_sm: usize,
    /// Whether the entry takes the Q, K and V tensor maps, whose parameter the build aligns
    /// ([`with_aligned_tensor_maps`]).
    takes_tensor_maps: bool,
}

impl EntryDeclaration {
    fn of(spec: &KernelSpec) -> Self {
        EntryDeclaration {
            threads: spec.tile.threads(),
            min_blocks_per_sm: spec.min_blocks_per_sm(),
            takes_tensor_maps: spec.takes_tensor_maps(),
        }
    }
}

/// `body`, one entry's PTX, with its launch bounds (`.maxntid threads, 1, 1` and
/// `.minnctapersm`) after its parameter list; unchanged without bounds.
///
/// Why bounds at all: without one ptxas squeezes a kernel's registers towards the next
/// occupancy step, and it does so by scheduling the `ldmatrix` loads later: `d64_m64_n64_w4_s3`
/// went to 129 registers with its K fragments loaded one or three ahead of their MMAs, 4-6%
/// slower at D=64 under causal masking than the 162-register schedule ptxas gives it with the
/// bounds, which loads eight ahead (log 39). So most entries ask for one block per SM and leave
/// how many share an SM to their registers and shared memory.
fn with_launch_bounds(body: &str, bounds: Option<EntryDeclaration>) -> String {
    const PARAMETERS_END: &str = "\n)\n";
    match (body.find(PARAMETERS_END), bounds) {
        (
            Some(at),
            Some(EntryDeclaration {
                threads,
                min_blocks_per_sm,
                ..
            }),
        ) => {
            let (head, tail) = body.split_at(at + PARAMETERS_END.len());
            format!("{head}.maxntid {threads}, 1, 1\n.minnctapersm {min_blocks_per_sm}\n{tail}")
        }
        _ => body.to_owned(),
    }
}

/// `body`, the PTX of entry `name`, which takes the Q, K and V tensor maps
/// ([`KernelSpec::takes_tensor_maps`]), with their parameter (the second) declared 64-byte
/// aligned, as TMA reads a tensor map: rustc declares it 8-byte aligned, as a `[u64; 48]`, and
/// crashes on a parameter type of 64-byte alignment. Panics where the declaration is not
/// there: the kernel's TMA copies would fail on a misaligned map.
fn with_aligned_tensor_maps(body: &str, name: &str) -> String {
    let declared =
        |align: usize| format!(".param .align {align} .b8 {name}_param_1[{TENSOR_MAPS_BYTES}]");
    assert!(
        body.contains(&declared(8)),
        "{name} takes the tensor maps, but its PTX declares no `{}`",
        declared(8)
    );
    body.replacen(&declared(8), &declared(64), 1)
}

/// `body`, one function's PTX, with its basic-block labels `$L__BB<n>_<block>` renamed to
/// `$L__BB0_<block>`: `n` is the function's index in the file it came from.
fn labels_as_function_zero(body: &str) -> String {
    const LABEL: &str = "$L__BB";
    let Some(at) = body.find(LABEL) else {
        return body.to_owned();
    };
    let digits = body[at + LABEL.len()..]
        .find(|c: char| !c.is_ascii_digit())
        .expect("a label goes on after its function index");
    let prefix = &body[at..at + LABEL.len() + digits + 1];
    body.replace(prefix, "$L__BB0_")
}

fn utf8(path: &Path) -> &str {
    path.to_str()
        .unwrap_or_else(|| panic!("OUT_DIR is not UTF-8: {}", path.display()))
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
