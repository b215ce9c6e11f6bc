//! The device the GPU tests run on: one context of device 0 for the whole test binary, and
//! the transports every readback test covers.
use cudarc::driver::CudaContext;
use sized_readback::Transport;
use std::sync::{Arc, OnceLock};

/// Both transports, for tests that run once per transport.
pub const TRANSPORTS: [Transport; 2] = [Transport::Mapped, Transport::Staged];

/// The context of device 0, opened on first use. GPU tests only: the harness reports them
/// ignored before they run when there is no device, so this panics only on a broken driver.
pub fn ctx() -> Arc<CudaContext> {
    static CTX: OnceLock<Arc<CudaContext>> = OnceLock::new();
    CTX.get_or_init(|| sized_readback::device::open(0).expect("a GPU (checked before the tests)"))
        .clone()
}
