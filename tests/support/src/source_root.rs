//! Where the repository's files are, for tests that read them: `SRB_SOURCE_DIR` when set (the
//! GPU verification sets it to its copy of the tree, which is not at the build machine's path),
//! else the root this crate was built from.
use std::path::PathBuf;

/// The repository root.
pub fn source_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("SRB_SOURCE_DIR") {
        return PathBuf::from(dir);
    }
    // This crate is tests/support/ under the root.
    let mut p = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    p.pop();
    p.pop();
    p
}
