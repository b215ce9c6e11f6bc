//! What the tests of sized-readback share (a dev-only crate, never published): the root
//! crate's GPU test binary (`tests/gpu/`), the C API's tests (`capi/tests/`) and the long soak
//! (`examples/soak.rs`) depend on it.
//!
//! - [`harness`]: the test harness (libtest-mimic): a [`Test`] per function, registered by
//!   [`tests!`] under the function's own name, with its needs (a GPU, two, none) and whether it
//!   runs alone; GPU tests are reported as *ignored* without a GPU, never as passed.
//! - [`device`]: each subject's context of the device, and the transports the tests cover.
//! - [`check`]: an expected error, a readout's bytes.
//! - [`child`]: scenarios that poison their CUDA context on purpose, run in a child process.
//! - [`step`]: the embedding step kernel (`srbe_step`), launched and mirrored on the host.
//! - [`soak`]: many random readbacks, each checked against a host reference.
//! - [`source_root`]: where the repository's files are, for tests that read them.
pub mod check;
pub mod child;
pub mod device;
pub mod harness;
pub mod producers;
pub mod soak;
pub mod source_root;
pub mod step;

pub use device::{SubjectContext, TRANSPORTS};
pub use harness::{run, Test};
