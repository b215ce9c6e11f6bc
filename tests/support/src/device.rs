//! The device the GPU tests run on, and the transports every readback test covers.
//!
//! Each subject (a module of the GPU test binary, the C API's tests) opens its own context
//! object of device 0, once, through a [`SubjectContext`] static. They all retain the same
//! primary context; what is per object is cudarc's record of errors it met where it could not
//! return them (in drops), which some tests check (`check_err`). A subject thus sees only its
//! own tests' records, as when each subject was a test binary of its own.
use cudarc::driver::CudaContext;
use sized_readback::Transport;
use std::sync::{Arc, OnceLock};

/// Both transports, for tests that run once per transport.
pub const TRANSPORTS: [Transport; 2] = [Transport::Mapped, Transport::Staged];

/// A subject's context of device 0, opened on first use.
pub struct SubjectContext(OnceLock<Arc<CudaContext>>);

impl SubjectContext {
    pub const fn new() -> Self {
        SubjectContext(OnceLock::new())
    }

    /// The context. GPU tests only: the harness reports them ignored before they run when
    /// there is no device, so this panics only on a broken driver.
    pub fn get(&self) -> Arc<CudaContext> {
        self.0
            .get_or_init(|| {
                sized_readback::device::open(0).expect("a GPU (checked before the tests)")
            })
            .clone()
    }
}

impl Default for SubjectContext {
    fn default() -> Self {
        Self::new()
    }
}
