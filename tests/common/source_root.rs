//! Where the repository's files are, for tests that read them: `SRB_SOURCE_DIR` when set (the
//! GPU verification sets it to its copy of the tree, which is not at the build machine's path),
//! else the root this test was built from.
#![allow(dead_code)]

use std::path::PathBuf;

/// The repository root. `manifest_dir` is the test crate's `CARGO_MANIFEST_DIR`, `depth` how
/// many folders below the root that crate lies (0 for the root crate, 1 for capi/).
pub fn source_root(manifest_dir: &str, depth: usize) -> PathBuf {
    if let Some(dir) = std::env::var_os("SRB_SOURCE_DIR") {
        return PathBuf::from(dir);
    }
    let mut p = PathBuf::from(manifest_dir);
    for _ in 0..depth {
        p.pop();
    }
    p
}
