//! The links that make the published packages build on their own: cargo leaves out of a package
//! whatever lies outside its folder, and every folder holding a `Cargo.toml`, so `flash-attn`
//! holds the kernel crates' sources through `host/kernels-gpu/` (each manifest as
//! `Cargo.toml.in`) and `flash-attn-params` its build's shared files through `params/shared/`.
//! A package holds a link's target as a file (`cargo package` verifies that each builds).

use std::path::{Path, PathBuf};

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize()
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// Whether `mirror` reaches every file of the tree at `original` (its build output aside), a
/// `Cargo.toml` as `Cargo.toml.in`, through links to the same files or folders.
fn check_mirror(original: &Path, mirror: &Path) {
    let entries = std::fs::read_dir(original)
        .unwrap_or_else(|error| panic!("{}: {error}", original.display()));
    for entry in entries {
        let source = entry.expect("a readable folder").path();
        let name = source.file_name().expect("an entry has a name");
        if name == "target" {
            continue;
        }
        let linked = mirror.join(if name == "Cargo.toml" {
            "Cargo.toml.in".as_ref()
        } else {
            name
        });
        let is_link = std::fs::symlink_metadata(&linked).is_ok_and(|meta| meta.is_symlink());
        if source.is_dir() && !is_link {
            // A folder holding a package: a folder of links, never a link to it.
            check_mirror(&source, &linked);
        } else {
            assert!(
                linked.exists() && canonical(&linked) == canonical(&source),
                "{} must link to {}: cargo would leave it out of the flash-attn package",
                linked.display(),
                source.display()
            );
        }
    }
}

#[test]
fn the_runtime_package_holds_the_kernel_crates() {
    let repository = repository();
    check_mirror(
        &repository.join("kernels-gpu"),
        &repository.join("host/kernels-gpu"),
    );
}

#[test]
fn the_params_package_holds_its_build_s_shared_files() {
    let repository = repository();
    for (link, target) in [
        ("params/shared/dispatch.rs", "build-support/src/dispatch.rs"),
        (
            "params/shared/dispatch-table.tsv",
            "host/dispatch-table.tsv",
        ),
        (
            "params/shared/fallback-kernels.txt",
            "host/fallback-kernels.txt",
        ),
    ] {
        assert_eq!(
            canonical(&repository.join(link)),
            canonical(&repository.join(target)),
            "{link} must link to {target}"
        );
    }
}
