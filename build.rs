//! Build script: runs no tool. The kernels and the slot bindings are committed (made by
//! `cargo xtask regen`), so building this crate needs neither a CUDA toolkit nor libclang.
//!
//! It only tells dependents' build scripts where the device headers are
//! (`sized_readback/append.cuh`, `sized_readback/slot.h`): `DEP_SIZED_READBACK_INCLUDE`, from
//! Cargo's `links` metadata.
fn main() {
    let root = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:include={root}/include");
    println!("cargo:rerun-if-changed=build.rs");
}
