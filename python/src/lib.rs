//! `sized_readback._native`: the Python binding of sized-readback, on the library's public
//! Rust API. Readbacks take device arrays through `__dlpack__` or `__cuda_array_interface__`
//! (PyTorch tensors through their own accessors), streams as framework stream objects or raw
//! handles, and hand back the data as numpy views of the pinned slot. The pure-Python package
//! `sized_readback` re-exports everything and defines the exception classes.
mod append;
mod array;
mod core_ticket;
mod deferred;
mod detached_drop;
mod dlpack;
mod driver;
mod errors;
mod graph;
mod info;
mod inputs;
mod keep;
mod npy;
mod order;
mod profile;
mod py_util;
mod readback;
mod readout;
mod retired;
mod settings;
mod shared;
mod sized_launch;
mod spec;
mod stream;
mod testing;
mod ticket;
mod wait_clock;

use errors::IntoPy;
use pyo3::prelude::*;

/// Number of CUDA devices. Raises `DriverNotFoundError` when no CUDA driver is installed.
#[pyfunction]
fn device_count(py: Python<'_>) -> PyResult<usize> {
    srb::device::count().py_err(py)
}

/// The library's own allocations alive now, over every device: a dict of `device`,
/// `device_bytes` (device memory: the staged transports' slots), `pinned`, `pinned_bytes`
/// (page-locked host memory: the slots). Back to its earlier value once every readback,
/// ticket and readout made since is gone (after `gc.collect()`), except graph readbacks that
/// recorded into a graph, which are freed at exit.
#[pyfunction]
fn live_allocations(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    let a = srb::allocations::live();
    let d = pyo3::types::PyDict::new(py);
    d.set_item("device", a.device)?;
    d.set_item("device_bytes", a.device_bytes)?;
    d.set_item("pinned", a.pinned)?;
    d.set_item("pinned_bytes", a.pinned_bytes)?;
    Ok(d)
}

/// Whether a CUDA driver and at least one device are present (never raises).
#[pyfunction]
fn is_available() -> bool {
    srb::device::count().is_ok_and(|n| n > 0)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<readback::Readback>()?;
    m.add_class::<ticket::Ticket>()?;
    m.add_class::<readout::Readout>()?;
    m.add_class::<readout::SlotView>()?;
    m.add_class::<graph::GraphReadback>()?;
    m.add_class::<append::AppendReadback>()?;
    m.add_class::<append::PendingAppend>()?;
    m.add_class::<sized_launch::SizedLaunch>()?;
    m.add_class::<sized_launch::SizedTicket>()?;
    m.add_class::<sized_launch::SizeClass>()?;
    m.add_class::<sized_launch::LaunchOutcome>()?;
    m.add_function(wrap_pyfunction!(device_count, m)?)?;
    m.add_function(wrap_pyfunction!(is_available, m)?)?;
    m.add_function(wrap_pyfunction!(live_allocations, m)?)?;
    m.add_function(wrap_pyfunction!(retired::release_retired, m)?)?;
    m.add_function(wrap_pyfunction!(retired::retired_count, m)?)?;
    m.add("KERNEL_TARGETS", srb::KERNEL_TARGETS)?;
    m.add("APPEND_HEADER", srb::append::HEADER)?;
    m.add("APPEND_DESC_SIZE", std::mem::size_of::<srb::AppendDesc>())?;
    m.add("MAX_COLUMNS", srb::MAX_COLUMNS)?;
    // transport="auto"'s thresholds: the core's (sized_readback::auto, from committed runs).
    m.add("AUTO_STAGED_MIN_BYTES", srb::auto::STAGED_MIN_BYTES)?;
    m.add(
        "AUTO_STAGED_MIN_FILL",
        srb::auto::STAGED_MIN_FILL_PERMILLE as f64 / 1000.0,
    )?;
    m.add("INFO_FIELDS", info::fields(m.py())?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    testing::add(m)?;
    Ok(())
}
