//! What holds a slot on the Python side, and the readout over it: `numpy()` views, `copy()`,
//! `__dlpack__`, and the release rule.
//!
//! The rule: the slot is held by the readout and by every view or DLPack export made from it,
//! and reused only after every hold is gone, so no view ever reads a slot that was reused.
//! Leaving a `with` block (or dropping the readout) lets go of the readout's hold; views still
//! alive keep the slot until they are gone. `release()` lets go too, but refuses with
//! `BufferError` while views are alive, as `memoryview.release()` does: for code that must know
//! the slot is free when it returns.
use crate::dlpack;
use crate::py_util::{asarray, numpy};
use crate::spec::ColSpec;
use pyo3::exceptions::{PyBufferError, PyIndexError, PyKeyError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use srb::{AppendTicket, ColumnTicket, OwnedReplay};
use std::sync::{Arc, Mutex};

/// Whatever holds one slot (the fields are held only for their `Drop`).
#[allow(dead_code)]
pub(crate) enum Holder {
    Pack(ColumnTicket),
    Append(AppendTicket),
    Replay(OwnedReplay),
    /// Host memory owned by Python objects (the no-GPU tests of readouts).
    Host(Vec<Py<PyAny>>),
}

/// One hold on a slot: dropping the last one releases the slot, with the thread's current
/// context put back afterwards (the last hold may go in a garbage collection, or in a DLPack
/// consumer's deleter on any thread).
pub(crate) struct HeldSlot(Option<Holder>);

impl HeldSlot {
    pub(crate) fn new(h: Holder) -> Self {
        HeldSlot(Some(h))
    }
}

impl Drop for HeldSlot {
    fn drop(&mut self) {
        match self.0.take() {
            Some(Holder::Host(v)) => drop(v),
            Some(h) => {
                let _restore = crate::driver::CtxGuard::save();
                drop(h);
            }
            None => {}
        }
    }
}

/// The column pointers of a readout.
pub(crate) fn column_bytes(r: &srb::ColumnReadout<'_>, n: usize) -> Vec<ColumnBytes> {
    (0..n)
        .map(|i| ColumnBytes {
            ptr: r.column_bytes(i).map(|b| b.as_ptr() as usize).unwrap_or(0),
        })
        .collect()
}

/// Where one column's rows lie in the held slot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ColumnBytes {
    pub(crate) ptr: usize,
}

/// The count and columns of a completed readback, in pinned host memory, for as long as it is
/// held. Made by `Ticket.wait()`, `GraphReadback.next()` and `AppendTicket.wait()`.
#[pyclass(module = "sized_readback._native")]
pub struct Readout {
    held: Mutex<Option<Arc<HeldSlot>>>,
    count: usize,
    seq: u64,
    cols: Vec<ColumnBytes>,
    specs: Arc<Vec<ColSpec>>,
    columns: bool,
}

impl Readout {
    pub(crate) fn new(
        held: HeldSlot,
        count: usize,
        seq: u64,
        cols: Vec<ColumnBytes>,
        specs: Arc<Vec<ColSpec>>,
        columns: bool,
    ) -> Self {
        Readout {
            held: Mutex::new(Some(Arc::new(held))),
            count,
            seq,
            cols,
            specs,
            columns,
        }
    }

    fn hold(&self) -> PyResult<Arc<HeldSlot>> {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| {
                PyValueError::new_err(
                    "the readout was released: its slot may hold another readback",
                )
            })
    }

    /// The column index of `key` (an int, a column name, or None for a one-column readback).
    fn index(&self, key: Option<&Bound<'_, PyAny>>) -> PyResult<Option<usize>> {
        let Some(k) = key.filter(|k| !k.is_none()) else {
            return Ok(None);
        };
        if let Ok(name) = k.cast::<PyString>() {
            let name = name.to_cow()?;
            let name: &str = &name;
            return self
                .specs
                .iter()
                .position(|s| s.name.as_deref() == Some(name))
                .map(Some)
                .ok_or_else(|| PyKeyError::new_err(format!("no column named {name:?}")));
        }
        let i: isize = k
            .extract()
            .map_err(|_| PyTypeError::new_err("a column is given by its index or its name"))?;
        let n = self.cols.len() as isize;
        let j = if i < 0 { i + n } else { i };
        if !(0..n).contains(&j) {
            return Err(PyIndexError::new_err(format!(
                "column {i} does not exist: the readout has {n}"
            )));
        }
        Ok(Some(j as usize))
    }

    fn shape(&self, spec: &ColSpec) -> Vec<usize> {
        let mut s = Vec::with_capacity(1 + spec.row_shape.len());
        s.push(self.count);
        s.extend_from_slice(&spec.row_shape);
        s
    }

    /// A read-only numpy view of column `i`, holding the slot: made through numpy's C API
    /// from the column's cached dtype (no `__array_interface__` dict for numpy to parse), or
    /// through `numpy.asarray` where that API is unavailable.
    fn view<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyAny>> {
        let held = self.hold()?;
        let spec = &self.specs[i];
        let mut shape = [0isize; 1 + crate::spec::MAX_ROW_DIMS];
        let dims = 1 + spec.row_shape.len();
        if dims > shape.len() {
            return self.view_by_interface(py, i, held);
        }
        shape[0] = self.count as isize;
        for (d, &r) in shape[1..dims].iter_mut().zip(&spec.row_shape) {
            *d = r as isize;
        }
        let base = Bound::new(
            py,
            SlotView {
                _held: held.clone(),
                iface: None,
            },
        )?;
        // SAFETY: the column's `count` rows of `spec.base` elements (row shape included) lie
        // in the held slot at this address (the core's readout), aligned for the element, and
        // the slot is neither written nor reused while `base` (the view's base object, which
        // holds the slot) lives.
        let made = unsafe {
            crate::npy::view(
                py,
                spec.base.bind(py),
                &shape[..dims],
                self.cols[i].ptr as *mut std::ffi::c_void,
                base.into_any(),
            )
        }?;
        match made {
            Some(a) => Ok(a),
            None => self.view_by_interface(py, i, held),
        }
    }

    /// The view through `numpy.asarray` over an `__array_interface__`.
    fn view_by_interface<'py>(
        &self,
        py: Python<'py>,
        i: usize,
        held: Arc<HeldSlot>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let spec = &self.specs[i];
        let iface = PyDict::new(py);
        iface.set_item(intern!(py, "shape"), PyTuple::new(py, self.shape(spec))?)?;
        iface.set_item(intern!(py, "typestr"), &spec.typestr)?;
        if let Some(d) = &spec.descr {
            iface.set_item(intern!(py, "descr"), d.bind(py))?;
        }
        iface.set_item(intern!(py, "data"), (self.cols[i].ptr, true))?;
        iface.set_item(intern!(py, "strides"), py.None())?;
        iface.set_item(intern!(py, "version"), 3)?;
        let hold = Bound::new(
            py,
            SlotView {
                _held: held,
                iface: Some(iface.unbind()),
            },
        )?;
        let a = asarray(py)?.call1((hold,))?;
        if spec.kind == b'V' && spec.descr.is_none() {
            // Raw bytes: give them the column's own dtype (e.g. ml_dtypes.bfloat16).
            return a.call_method1(intern!(py, "view"), (spec.base.bind(py),));
        }
        Ok(a)
    }

    fn each<'py>(
        &self,
        py: Python<'py>,
        key: Option<&Bound<'py, PyAny>>,
        f: impl Fn(Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match self.index(key)? {
            Some(i) => f(self.view(py, i)?),
            None if !self.columns => f(self.view(py, 0)?),
            None => {
                let mut v = Vec::with_capacity(self.cols.len());
                for i in 0..self.cols.len() {
                    v.push(f(self.view(py, i)?)?);
                }
                Ok(PyTuple::new(py, v)?.into_any())
            }
        }
    }

    fn release_inner(&self, strict: bool) -> PyResult<()> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = held.as_ref() {
            let others = Arc::strong_count(h) - 1;
            if strict && others > 0 {
                return Err(PyBufferError::new_err(format!(
                    "{others} numpy view(s) or DLPack export(s) of this readout are alive: they \
                     hold its slot. Delete them (or take out.copy() instead of out.numpy()) \
                     before release()"
                )));
            }
        }
        *held = None;
        Ok(())
    }
}

#[pymethods]
impl Readout {
    /// The count the device held: rows in every column.
    #[getter]
    fn count(&self) -> usize {
        self.count
    }

    /// The readback's sequence number (1, 2, 3, ... per readback object).
    #[getter]
    fn seq(&self) -> u64 {
        self.seq
    }

    /// Whether `release()` was called (the data is then unreachable).
    #[getter]
    fn released(&self) -> bool {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }

    /// Live numpy views and DLPack exports of this readout (each holds its slot).
    #[getter]
    fn exports(&self) -> usize {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map_or(0, |h| Arc::strong_count(h) - 1)
    }

    fn __len__(&self) -> usize {
        self.count
    }

    /// Zero-copy, read-only numpy view(s) of the pinned slot: one array for a one-column
    /// readback (or `column=` given), a tuple of arrays otherwise. Each view holds the slot.
    #[pyo3(signature = (column=None))]
    fn numpy<'py>(
        &self,
        py: Python<'py>,
        column: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.each(py, column, Ok)
    }

    /// Copies of the data as ordinary numpy arrays (they hold no slot).
    #[pyo3(signature = (column=None))]
    fn copy<'py>(
        &self,
        py: Python<'py>,
        column: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let np = numpy(py)?;
        self.each(py, column, |a| np.call_method1(intern!(py, "array"), (a,)))
    }

    /// Lets go of this readout's hold on its slot. Raises `BufferError` while numpy views or
    /// DLPack exports of it are alive (they hold the slot); afterwards `numpy()` raises
    /// `ValueError`. Calling it again does nothing.
    fn release(&self) -> PyResult<()> {
        self.release_inner(true)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Lets go of the readout's hold on its slot, as `release()` does, except that views still
    /// alive do not make it fail: they keep the slot (and stay valid) until they are gone.
    #[pyo3(signature = (_exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.release_inner(false)?;
        Ok(false)
    }

    /// DLPack export of a one-column readout on the host (kDLCPU): zero-copy; the export holds
    /// the slot until its consumer lets go. `copy=True` exports a copy instead.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<&Bound<'_, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        if stream.is_some_and(|s| !s.is_none()) {
            return Err(PyBufferError::new_err(
                "the readout is in host memory: __dlpack__ takes no stream",
            ));
        }
        if let Some(d) = dl_device {
            if d != (dlpack::DL_CPU, 0) {
                return Err(PyBufferError::new_err(format!(
                    "the readout is in host memory (kDLCPU, 0), not on device {d:?}"
                )));
            }
        }
        if self.columns && self.cols.len() != 1 {
            return Err(PyBufferError::new_err(
                "a readout of several columns has no single DLPack tensor: use numpy(i)",
            ));
        }
        let versioned = max_version.is_some_and(|(major, _)| major >= 1);
        if copy == Some(true) {
            let c = self.copy(py, Some(&0i64.into_pyobject(py)?.into_any()))?;
            let kwargs = PyDict::new(py);
            if let Some(v) = max_version {
                kwargs.set_item("max_version", v)?;
            }
            return Ok(c
                .call_method(intern!(py, "__dlpack__"), (), Some(&kwargs))?
                .unbind());
        }
        let held = self.hold()?;
        let spec = &self.specs[0];
        let shape: Vec<i64> = self.shape(spec).into_iter().map(|s| s as i64).collect();
        dlpack::export(
            py,
            self.cols[0].ptr,
            spec.kind,
            spec.base_size,
            shape,
            held,
            versioned,
        )
    }

    /// `(kDLCPU, 0)`: the readout is in (pinned) host memory.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (dlpack::DL_CPU, 0)
    }

    fn __repr__(&self) -> String {
        let state = if self.released() { ", released" } else { "" };
        format!(
            "Readout(count={}, seq={}, columns={}{state})",
            self.count,
            self.seq,
            self.cols.len()
        )
    }
}

/// The owner of one numpy view's memory: holds the slot while the view (and every array
/// derived from it) lives, as the view's `base`.
#[pyclass(module = "sized_readback._native", frozen)]
pub struct SlotView {
    _held: Arc<HeldSlot>,
    /// For views made through `numpy.asarray` (numpy's C API unavailable).
    iface: Option<Py<PyDict>>,
}

#[pymethods]
impl SlotView {
    #[getter]
    fn __array_interface__(&self, py: Python<'_>) -> PyResult<Py<PyDict>> {
        self.iface.as_ref().map(|d| d.clone_ref(py)).ok_or_else(|| {
            pyo3::exceptions::PyAttributeError::new_err("this view was made through numpy's C API")
        })
    }
}
