//! rustc-link-arg does not travel from a dependency's build script, so the
//! rpath that metrale-gpu-sys found (its `libdir` metadata, read here as
//! DEP_METRALE_GPU_LIBDIR) is added again for this crate's tests, examples
//! and doctests.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_METRALE_GPU_LIBDIR");
    if let Ok(dir) = std::env::var("DEP_METRALE_GPU_LIBDIR") {
        println!("cargo:rustc-link-arg=-Wl,--enable-new-dtags,-rpath,{dir}");
    }
}
