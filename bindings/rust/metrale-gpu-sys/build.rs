//! Finds libmetrale_gpu with the `pkg-config` binary (no crate needed).
//!
//! `$PKG_CONFIG` names the binary (default `pkg-config`); `PKG_CONFIG_PATH`
//! may point at an install's `lib/pkgconfig` or at a Meson build directory's
//! `meson-uninstalled` folder. Every `-L` directory becomes a native search
//! path and an rpath, so test binaries and examples run without
//! LD_LIBRARY_PATH. The rpath is written as RUNPATH (--enable-new-dtags),
//! so LD_LIBRARY_PATH still wins where a binary is carried to another
//! machine (scripts/gpu-bindings-prep.sh).

use std::env;
use std::process::Command;

const PACKAGE: &str = "metrale_gpu";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for var in ["PKG_CONFIG", "PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR", "PKG_CONFIG_SYSROOT_DIR"] {
        println!("cargo:rerun-if-env-changed={var}");
    }

    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let output = Command::new(&pkg_config)
        .args(["--libs", PACKAGE])
        .output()
        .unwrap_or_else(|e| {
            panic!("metrale-gpu-sys: cannot run `{pkg_config}` ({e}); install pkg-config or set $PKG_CONFIG")
        });
    if !output.status.success() {
        panic!(
            "metrale-gpu-sys: `{pkg_config} --libs {PACKAGE}` failed: {}\n\
             Set PKG_CONFIG_PATH to the folder holding metrale_gpu.pc \
             (for a Meson build directory: <builddir>/meson-uninstalled).",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let flags = String::from_utf8(output.stdout).expect("pkg-config printed non-UTF-8 text");

    let mut linked_self = false;
    for flag in flags.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
            println!("cargo:rustc-link-arg=-Wl,--enable-new-dtags,-rpath,{dir}");
            println!("cargo:libdir={dir}");
        } else if let Some(lib) = flag.strip_prefix("-l") {
            linked_self |= lib == PACKAGE;
            println!("cargo:rustc-link-lib={lib}");
        }
    }
    if !linked_self {
        println!("cargo:rustc-link-lib={PACKAGE}");
    }
}
