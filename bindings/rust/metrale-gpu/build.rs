//! rustc-link-arg does not travel from a dependency's build script, so when
//! metrale-gpu-sys links the shared library (its `link` metadata, read here
//! as DEP_METRALE_GPU_LINK, is `dynamic`), the rpath it found (its `libdir`
//! metadata, DEP_METRALE_GPU_LIBDIR) is added again for this crate's tests,
//! examples and doctests. The static default needs none: the binaries do
//! not depend on libmetrale_gpu.so at all.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_METRALE_GPU_LIBDIR");
    println!("cargo:rerun-if-env-changed=DEP_METRALE_GPU_LINK");
    if std::env::var("DEP_METRALE_GPU_LINK").as_deref() != Ok("dynamic") {
        return;
    }
    if let Ok(dir) = std::env::var("DEP_METRALE_GPU_LIBDIR") {
        println!("cargo:rustc-link-arg=-Wl,--enable-new-dtags,-rpath,{dir}");
    }
}
