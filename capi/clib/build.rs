//! Gives the shared library a SONAME, so programs record `libsized_readback.so.0` rather than
//! the path they were linked against, and keep working when the install prefix moves.
fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libsized_readback.so.{major}");
    }
}
