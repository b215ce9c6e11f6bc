//! Dropping a core object (a readback, a sized launch) with the GIL released.
//!
//! Such a drop frees device and pinned memory, and a synchronous free waits for the device's
//! running work (`results/2026-12-04/free-stall-probe-df0c44a/`). The driver holds every other
//! thread's calls meanwhile; holding the GIL too would also stop every Python thread that
//! makes none.
//!
//! Only for what is dropped rarely: a ticket, dropped at every enqueue, keeps the GIL (once
//! released, another thread may hold it for a switch interval, 5 ms), and so does a readout's
//! last hold, which a DLPack consumer may drop on a thread without the GIL. Either frees the
//! slots only when it outlived its readback.
use pyo3::Python;

/// Drops `value` with the GIL released. While the interpreter shuts down (where a thread that
/// detaches may not attach again) it drops with the GIL held, as any object would.
pub(crate) fn drop_detached<T: Send>(value: T) {
    let mut value = Some(value);
    Python::try_attach(|py| {
        let v = value.take();
        py.detach(move || drop(v));
    });
    drop(value);
}
