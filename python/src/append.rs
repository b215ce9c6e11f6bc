//! `AppendReadback`: slots filled by the user's own kernel through the append header
//! (`sized_readback/append.cuh`), e.g. a CuPy `RawKernel` that takes the descriptor by value.
use crate::driver::CtxGuard;
use crate::errors::IntoPy;
use crate::info::{self, Facts};
use crate::keep::Keep;
use crate::settings::{
    check_capacity, check_settings, check_spill, check_staged_copy, transport_name, IntSetting,
};
use crate::shared::{open, Shared};
use crate::spec::{describe_columns, parse_columns, ColSpec};
use crate::stream::handle_of;
use crate::ticket::Ticket;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict};
use srb::cudarc::driver::sys::CUstream;
use srb::{AppendReadback as Core, ReadbackConfig};
use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex};

/// The descriptor's bytes as a one-element numpy array of `APPEND_DESC_DTYPE` (what CuPy
/// passes to a kernel by value).
pub(crate) fn desc_array(py: Python<'_>, bytes: &[u8]) -> PyResult<Py<PyAny>> {
    static MAKE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let make = MAKE.get_or_try_init(py, || {
        py.import("sized_readback._append")?
            .getattr("_desc_array")
            .map(Bound::unbind)
    })?;
    Ok(make.bind(py).call1((PyBytes::new(py, bytes),))?.unbind())
}

/// A readback whose slots the user's kernels fill through the append header: no count in
/// device memory, no pack kernel.
#[pyclass(module = "sized_readback._native")]
pub struct AppendReadback {
    rb: ManuallyDrop<Core>,
    shared: Arc<Shared>,
    specs: Arc<Vec<ColSpec>>,
    columns: bool,
}

impl AppendReadback {
    fn begin_inner(&self, py: Python<'_>, stream: &Bound<'_, PyAny>) -> PyResult<PendingAppend> {
        if stream.is_none() {
            return Err(PyValueError::new_err(
                "an append needs the stream its kernel is launched on (e.g. \
                 cupy.cuda.get_current_stream()); 0 is the legacy default stream",
            ));
        }
        let handle = handle_of(py, stream)?;
        let _restore = CtxGuard::save();
        self.shared.bind(py)?;
        // SAFETY: the stream handle comes from a live stream object (kept alive by the
        // pending append, and by the ticket after it) or the caller's int handle, whose
        // lifetime the docs make the caller's.
        let p = unsafe { self.rb.begin_raw_stream(handle as CUstream, None) }.py_err(py)?;
        let desc = desc_array(py, p.desc().as_bytes())?;
        Ok(PendingAppend {
            transport: transport_name(self.rb.info().transport),
            inner: Mutex::new(Some(p)),
            desc,
            stream: stream.clone().unbind(),
            shared: self.shared.clone(),
            specs: self.specs.clone(),
            columns: self.columns,
            ticket: Mutex::new(None),
        })
    }
}

#[pymethods]
impl AppendReadback {
    #[new]
    #[pyo3(signature = (capacity, dtype=None, columns=None, slots=IntSetting(2), device=IntSetting(0), transport="mapped", spill=None, staged_copy="auto"))]
    #[pyo3(
        text_signature = "(capacity, dtype=None, columns=None, slots=2, device=0, transport='mapped', spill=None, staged_copy='auto')"
    )]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        capacity: IntSetting,
        dtype: Option<&Bound<'_, PyAny>>,
        columns: Option<&Bound<'_, PyAny>>,
        slots: IntSetting,
        device: IntSetting,
        transport: &str,
        spill: Option<IntSetting>,
        staged_copy: &str,
    ) -> PyResult<Self> {
        let (capacity, slots, device, transport) =
            check_settings(capacity.0, slots.0, device.0, transport)?;
        let staged_copy = check_staged_copy(staged_copy)?;
        let spill = check_spill(spill.map(|s| s.0))?;
        let (specs, columns) = parse_columns(py, dtype, columns)?;
        let mut config = ReadbackConfig::new(capacity)
            .slots(slots)
            .transport(transport)
            .staged_copy(staged_copy);
        if let Some(s) = spill {
            config = config.spill(s as usize);
        }
        let (shared, schema, _restore) = open(py, device, &specs, |s| Core::check(s, &config))?;
        let rb = Core::new(&shared.ctx, &schema, config).py_err(py)?;
        Ok(AppendReadback {
            rb: ManuallyDrop::new(rb),
            shared,
            specs: Arc::new(specs),
            columns,
        })
    }

    /// Reserves a slot on `stream` and returns the pending append: launch one kernel with its
    /// `desc` on `stream`, then call `launched()` (or use it as a context manager).
    fn begin(&self, py: Python<'_>, stream: &Bound<'_, PyAny>) -> PyResult<PendingAppend> {
        self.begin_inner(py, stream)
    }

    /// Reserves a slot on `stream`, calls `launch(desc)` (which must launch exactly one grid
    /// that appends through `desc`, on `stream`), and returns the `Ticket`. If `launch`
    /// raises, the slot is given back and the exception propagates.
    fn append(
        &self,
        py: Python<'_>,
        launch: &Bound<'_, PyAny>,
        stream: &Bound<'_, PyAny>,
    ) -> PyResult<Ticket> {
        let p = self.begin_inner(py, stream)?;
        let desc = p.desc.clone_ref(py);
        match launch.call1((desc,)) {
            Ok(_) => p.finish(py),
            Err(e) => {
                p.cancel();
                Err(e)
            }
        }
    }

    /// Slots held now.
    #[getter]
    fn slots_in_use(&self) -> usize {
        self.rb.slots_in_use()
    }
    /// The settings in effect and the slot layout, as a dict (as `Readback.info`;
    /// `staged_copy` is `"whole"` for the staged transport: an append kernel cannot pick the
    /// copy's size).
    #[getter]
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let facts = Facts {
            core: self.rb.info(),
            device: self.shared.device,
            auto: None,
        };
        info::dict(py, &facts)
    }
    /// Replaces the slots with ones of `capacity` rows (after an `AppendOverflowError`).
    fn grow(&self, py: Python<'_>, capacity: IntSetting) -> PyResult<()> {
        let _restore = CtxGuard::save();
        self.rb.grow(check_capacity(capacity.0)?).py_err(py)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "AppendReadback(capacity={}, {}, slots={}, device={})",
            self.rb.info().capacity,
            describe_columns(py, &self.specs, self.columns),
            self.rb.info().slots,
            self.shared.device
        )
    }
}

/// A reserved append slot: pass `desc` to the kernel, then `launched()`.
#[pyclass(module = "sized_readback._native")]
pub struct PendingAppend {
    inner: Mutex<Option<srb::PendingAppend<'static>>>,
    desc: Py<PyAny>,
    /// Keeps the stream object alive while the append is pending.
    stream: Py<PyAny>,
    shared: Arc<Shared>,
    specs: Arc<Vec<ColSpec>>,
    columns: bool,
    ticket: Mutex<Option<Py<Ticket>>>,
    transport: &'static str,
}

impl PendingAppend {
    fn take(&self) -> Option<srb::PendingAppend<'static>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    fn finish(&self, py: Python<'_>) -> PyResult<Ticket> {
        let p = self.take().ok_or_else(|| {
            PyValueError::new_err("this append was already launched or cancelled")
        })?;
        let _restore = CtxGuard::save();
        let t = p.launched().py_err(py)?;
        let mut keep = Keep::default();
        keep.push(self.stream.clone_ref(py));
        Ok(Ticket::append(
            self.transport,
            t,
            keep,
            self.shared.clone(),
            self.specs.clone(),
            self.columns,
        ))
    }

    fn cancel(&self) {
        if let Some(p) = self.take() {
            let _restore = CtxGuard::save();
            drop(p);
        }
    }
}

impl Drop for PendingAppend {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl Drop for AppendReadback {
    fn drop(&mut self) {
        let _restore = CtxGuard::save();
        // SAFETY: taken once, here, and never used again.
        let rb = unsafe { ManuallyDrop::take(&mut self.rb) };
        crate::detached_drop::drop_detached(rb);
    }
}

#[pymethods]
impl PendingAppend {
    /// The descriptor: a one-element numpy array of `APPEND_DESC_DTYPE`, the kernel's
    /// `srb_append_desc` parameter passed by value.
    #[getter]
    fn desc(&self, py: Python<'_>) -> Py<PyAny> {
        self.desc.clone_ref(py)
    }

    /// The kernel was launched on the stream: records the slot's completion there and returns
    /// the `Ticket`.
    fn launched(&self, py: Python<'_>) -> PyResult<Py<Ticket>> {
        let t = Py::new(py, self.finish(py)?)?;
        *self.ticket.lock().unwrap_or_else(|p| p.into_inner()) = Some(t.clone_ref(py));
        Ok(t)
    }

    /// Gives the slot back without a launch (the slot is recorded as failed).
    #[pyo3(name = "cancel")]
    fn py_cancel(&self) {
        self.cancel();
    }

    /// The ticket, once launched (also after leaving a `with` block).
    #[getter]
    fn ticket(&self, py: Python<'_>) -> Option<Py<Ticket>> {
        self.ticket
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|t| t.clone_ref(py))
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Without an exception: `launched()`. With one: the slot is given back.
    #[pyo3(signature = (exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if exc_type.is_none_or(|t| t.is_none()) {
            if self
                .inner
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_some()
            {
                self.launched(py)?;
            }
        } else {
            self.cancel();
        }
        Ok(false)
    }
}
