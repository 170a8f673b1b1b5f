//! Finds libmetrale_gpu with the `pkg-config` binary (no crate needed) and
//! links it statically by default, so a program's first run needs no
//! LD_LIBRARY_PATH and no rpath.
//!
//! `$PKG_CONFIG` names the binary (default `pkg-config`); `PKG_CONFIG_PATH`
//! may point at an install's `lib/pkgconfig` or at a Meson build directory's
//! `meson-uninstalled` folder.
//!
//! Link mode: static unless the `dynamic` feature is on or
//! `METRALE_GPU_LINK=dynamic` (the variable wins over the feature;
//! `METRALE_GPU_LINK=static` forces static).
//! - static: `pkg-config --static --libs metrale_gpu`; `libmetrale_gpu.a`
//!   from the first `-L` directory holding it is bundled into this crate's
//!   rlib, and the system libraries it needs (spdlog, fmt, libstdc++, libm,
//!   dl, pthread: the `.pc`'s `Libs.private`) are linked dynamically. The
//!   archive is a rerun-if-changed input, so a rebuilt library is picked up.
//! - dynamic: `pkg-config --libs metrale_gpu`; every `-L` directory becomes a
//!   native search path and an rpath, so this workspace's test binaries and
//!   examples run without LD_LIBRARY_PATH. The rpath is written as RUNPATH
//!   (--enable-new-dtags), so LD_LIBRARY_PATH still wins where a binary is
//!   carried to another machine (scripts/gpu-bindings-prep.sh).
//!
//! Either way `cargo:libdir` (DEP_METRALE_GPU_LIBDIR for dependents' build
//! scripts) is the first `-L` directory and `cargo:link` (DEP_METRALE_GPU_LINK)
//! is `static` or `dynamic`.

use std::env;
use std::path::Path;
use std::process::Command;

const PACKAGE: &str = "metrale_gpu";
const ARCHIVE: &str = "libmetrale_gpu.a";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for var in ["PKG_CONFIG", "PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR", "PKG_CONFIG_SYSROOT_DIR", "METRALE_GPU_LINK"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let dynamic = match env::var("METRALE_GPU_LINK").as_deref() {
        Ok("dynamic") => true,
        Ok("static") => false,
        Ok(other) => panic!("metrale-gpu-sys: METRALE_GPU_LINK={other:?}: expected \"static\" or \"dynamic\""),
        Err(_) => env::var_os("CARGO_FEATURE_DYNAMIC").is_some(),
    };

    let args: &[&str] = if dynamic { &["--libs", PACKAGE] } else { &["--static", "--libs", PACKAGE] };
    let flags = pkg_config(args);
    let dirs: Vec<&str> = flags.split_whitespace().filter_map(|f| f.strip_prefix("-L")).collect();
    let libs: Vec<&str> = flags
        .split_whitespace()
        .filter_map(|f| if f == "-pthread" { Some("pthread") } else { f.strip_prefix("-l") })
        .collect();
    for dir in &dirs {
        println!("cargo:rustc-link-search=native={dir}");
    }
    if let Some(dir) = dirs.first() {
        println!("cargo:libdir={dir}");
    }
    println!("cargo:link={}", if dynamic { "dynamic" } else { "static" });

    if dynamic {
        for dir in &dirs {
            println!("cargo:rustc-link-arg=-Wl,--enable-new-dtags,-rpath,{dir}");
        }
    } else {
        let Some(archive) = dirs.iter().map(|d| Path::new(d).join(ARCHIVE)).find(|p| p.is_file()) else {
            panic!(
                "metrale-gpu-sys: no {ARCHIVE} in the -L directories of `pkg-config --static --libs {PACKAGE}` \
                 ({dirs:?}). Build it (Meson's default, default_library=both; not with \
                 -Ddefault_library=shared), or link the shared library: METRALE_GPU_LINK=dynamic \
                 or the `dynamic` feature."
            )
        };
        println!("cargo:rerun-if-changed={}", archive.display());
    }
    // The library first, then what it needs (the linker reads left to right).
    let kind = if dynamic { "dylib" } else { "static" };
    println!("cargo:rustc-link-lib={kind}={PACKAGE}");
    for lib in libs.into_iter().filter(|l| *l != PACKAGE) {
        println!("cargo:rustc-link-lib={lib}");
    }
}

/// Runs pkg-config with `args`; its stdout, or a panic saying what to set.
fn pkg_config(args: &[&str]) -> String {
    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let output = Command::new(&pkg_config).args(args).output().unwrap_or_else(|e| {
        panic!("metrale-gpu-sys: cannot run `{pkg_config}` ({e}); install pkg-config or set $PKG_CONFIG")
    });
    if !output.status.success() {
        panic!(
            "metrale-gpu-sys: `{pkg_config} {}` failed: {}\n\
             Set PKG_CONFIG_PATH to the folder holding metrale_gpu.pc \
             (for a Meson build directory: <builddir>/meson-uninstalled).",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    String::from_utf8(output.stdout).expect("pkg-config printed non-UTF-8 text")
}
