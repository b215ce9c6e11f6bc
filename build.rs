//! Build script: runs no tool. The kernels and the slot bindings are committed (made by
//! `cargo xtask regen`), so building this crate needs neither a CUDA toolkit nor libclang.
//!
//! It tells dependents' build scripts where the device headers are
//! (`sized_readback/append.cuh`, `sized_readback/slot.h`): `DEP_SIZED_READBACK_INCLUDE`, from
//! Cargo's `links` metadata. And it stops a build with the `testing` feature outside the
//! repository with a sentence rather than `include_bytes!` errors: the test kernels' images
//! that feature embeds (`kernels/testing/`) are left out of the published package.
fn main() {
    let root = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:include={root}/include");
    println!("cargo:rerun-if-changed=build.rs");
    let testing_images = std::path::Path::new(&root).join("kernels/testing");
    if std::env::var_os("CARGO_FEATURE_TESTING").is_some() && !testing_images.is_dir() {
        panic!(
            "the `testing` feature (test support, not public API) builds only in the \
             sized-readback repository: {} is not in the published package",
            testing_images.display()
        );
    }
}
