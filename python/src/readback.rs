//! `Readback` and its `Ticket`: the host-sequenced readback of one or several columns.
use crate::array::{acquire, After, DeviceArray};
use crate::errors::{make, IntoPy};
use crate::py_util::{info_dict, torch_current_stream};
use crate::readout::{ColumnBytes, HeldSlot, Holder, Readout};
use crate::spec::{parse_columns, ColSpec};
use crate::stream::{resolve, CtxGuard, Shared};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use srb::cudarc::driver::sys::{CUevent, CUstream};
use srb::{
    ColumnReadback, ColumnReadout, ColumnSchema, ColumnSource, CountKind, RawCount, ReadbackConfig,
    StagedCopy, Transport,
};
use std::mem::ManuallyDrop;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest stretch a wait spends without the GIL before it checks for signals (Ctrl-C).
const WAIT_SLICE: Duration = Duration::from_millis(100);

/// Checks the settings every readback kind shares, before any driver call.
pub(crate) fn check_settings(
    capacity: i64,
    slots: i64,
    device: i64,
    transport: &str,
) -> PyResult<(usize, usize, i32, Transport)> {
    let capacity = check_capacity(capacity)?;
    if slots < 1 {
        return Err(make_config(format!(
            "slots must be at least 1, not {slots}"
        )));
    }
    if !(0..=i32::MAX as i64).contains(&device) {
        return Err(make_config(format!(
            "device must be a CUDA device ordinal (0, 1, ...), not {device}"
        )));
    }
    let transport = match transport {
        "mapped" => Transport::Mapped,
        "staged" => Transport::Staged,
        t => {
            return Err(make_config(format!(
                "transport must be \"mapped\" or \"staged\", not {t:?}"
            )))
        }
    };
    Ok((capacity, slots as usize, device as i32, transport))
}

/// The staged transport's copy from its Python name: `"auto"`, `"whole"` or `"sized"`.
pub(crate) fn check_staged_copy(copy: &str) -> PyResult<StagedCopy> {
    match copy {
        "auto" => Ok(StagedCopy::Auto),
        "whole" => Ok(StagedCopy::Whole),
        "sized" => Ok(StagedCopy::Sized),
        c => Err(make_config(format!(
            "staged_copy must be \"auto\", \"whole\" or \"sized\", not {c:?}"
        ))),
    }
}

/// The copy in use, as `info["staged_copy"]` and `.staged_copy` give it: `"whole"`,
/// `"sized"`, or `None` (mapped: nothing is copied).
pub(crate) fn staged_copy_name(c: Option<StagedCopy>) -> Option<&'static str> {
    match c? {
        StagedCopy::Sized => Some("sized"),
        _ => Some("whole"),
    }
}

/// A capacity in rows, from Python: at least 1 (readbacks and their `grow`).
pub(crate) fn check_capacity(capacity: i64) -> PyResult<usize> {
    if capacity < 1 {
        return Err(make_config(format!(
            "capacity must be at least 1 row, not {capacity}"
        )));
    }
    Ok(capacity as usize)
}

fn make_config(msg: String) -> PyErr {
    Python::attach(|py| make(py, "ConfigError", msg, &[]))
}

/// Opens the device (`DriverNotFoundError`, `NoDeviceError` when there is none) and the
/// schema of raw columns for `specs`. The guard puts the caller's current context back: keep
/// it until the readback is made.
pub(crate) fn open(
    py: Python<'_>,
    device: i32,
    specs: &[ColSpec],
    check: impl FnOnce(&ColumnSchema) -> srb::Result<()>,
) -> PyResult<(Arc<Shared>, ColumnSchema, CtxGuard)> {
    let mut schema = ColumnSchema::new();
    for s in specs {
        schema.raw_column(s.elem_size);
    }
    // The settings as the core checks them, before any driver call: the same ConfigError with
    // or without a GPU.
    check(&schema).py_err(py)?;
    // The driver's presence first (an error, not cudarc's panic), then the guard's query.
    srb::device::count().py_err(py)?;
    let restore = CtxGuard::save();
    let ctx = srb::device::open(device as usize).py_err(py)?;
    Ok((Shared::new(ctx, device), schema, restore))
}

/// The count kind of a 0-d (or one-element) device array.
fn count_kind(a: &DeviceArray) -> PyResult<CountKind> {
    if a.numel() != 1 {
        return Err(PyValueError::new_err(format!(
            "the count must be one element (a 0-d array), not an array of shape {:?}",
            a.shape
        )));
    }
    match (a.kind, a.itemsize) {
        (b'i', 4) => Ok(CountKind::I32),
        (b'i', 8) => Ok(CountKind::I64),
        (b'u', 4) => Ok(CountKind::U32),
        (b'u', 8) => Ok(CountKind::U64),
        _ => Err(PyValueError::new_err(format!(
            "the count must be int32, int64, uint32 or uint64, not {}",
            a.type_name()
        ))),
    }
}

/// The data argument as one object per column.
pub(crate) fn column_objects<'py>(
    data: &Bound<'py, PyAny>,
    specs: &[ColSpec],
    columns: bool,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if !columns {
        return Ok(vec![data.clone()]);
    }
    let objs: Vec<Bound<'py, PyAny>> = if let Ok(d) = data.cast::<PyDict>() {
        let mut v = Vec::with_capacity(specs.len());
        for (i, s) in specs.iter().enumerate() {
            let name = s.name.as_deref().ok_or_else(|| {
                PyTypeError::new_err(
                    "data as a dict needs named columns (columns={name: dtype, ...})",
                )
            })?;
            v.push(d.get_item(name)?.ok_or_else(|| {
                PyValueError::new_err(format!("data has no entry for column {name:?} ({i})"))
            })?);
        }
        if d.len() != specs.len() {
            return Err(PyValueError::new_err(format!(
                "data has {} entries for {} columns",
                d.len(),
                specs.len()
            )));
        }
        v
    } else if data.is_instance_of::<PyTuple>() || data.is_instance_of::<PyList>() {
        data.try_iter()?.collect::<PyResult<_>>()?
    } else {
        return Err(PyTypeError::new_err(
            "a readback of columns takes its data as a tuple (or list) of arrays, one per \
             column, or a dict by column name",
        ));
    };
    if objs.len() != specs.len() {
        return Err(PyValueError::new_err(format!(
            "data has {} arrays for {} columns",
            objs.len(),
            specs.len()
        )));
    }
    Ok(objs)
}

/// An enqueue's inputs, read and checked: the stream, the sources, the count, what to keep,
/// and the streams of producers still to wait for.
pub(crate) struct Inputs {
    pub(crate) stream: usize,
    pub(crate) sources: Vec<ColumnSource>,
    pub(crate) count: RawCount,
    pub(crate) keep: Vec<Py<PyAny>>,
    pub(crate) afters: Vec<After>,
    /// PyTorch's current stream, when the enqueue stream was resolved to it.
    pub(crate) torch_current: Option<usize>,
}

/// Reads `data` (per `specs`), `count` and `stream` (no driver call).
pub(crate) fn parse_inputs(
    py: Python<'_>,
    device: i32,
    specs: &[ColSpec],
    columns: bool,
    data: &Bound<'_, PyAny>,
    count: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<Inputs> {
    let objs = column_objects(data, specs, columns)?;
    let resolved = resolve(py, stream, objs.first(), device)?;
    let s = resolved.handle;
    let mut keep = Vec::with_capacity(2 * objs.len() + 3);
    keep.extend(resolved.keep);
    let mut sources = Vec::with_capacity(objs.len());
    let mut afters = Vec::with_capacity(objs.len() + 1);
    for (i, (o, spec)) in objs.iter().zip(specs).enumerate() {
        let what = if columns {
            format!("data for {}", spec.label(i))
        } else {
            "the data".to_string()
        };
        let a = acquire(py, o, s, device, &what, &mut keep)?;
        let rows = spec.rows_of(py, &a, &what)?;
        afters.push(a.after);
        sources.push(ColumnSource {
            ptr: a.ptr,
            len: rows,
        });
    }
    let c = acquire(py, count, s, device, "the count", &mut keep)?;
    let kind = count_kind(&c)?;
    afters.push(c.after);
    Ok(Inputs {
        stream: s,
        sources,
        count: RawCount::new(c.ptr, kind),
        keep,
        afters,
        torch_current: resolved.torch_current.then_some(s),
    })
}

/// [`parse_inputs`], then binds the context and orders the enqueue stream after the
/// producers' streams.
pub(crate) fn inputs(
    py: Python<'_>,
    shared: &Shared,
    specs: &[ColSpec],
    columns: bool,
    data: &Bound<'_, PyAny>,
    count: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<Inputs> {
    let inp = parse_inputs(py, shared.device, specs, columns, data, count, stream)?;
    shared.bind(py)?;
    let mut producers = Vec::with_capacity(inp.afters.len());
    let mut torch_now = inp.torch_current;
    for &a in &inp.afters {
        match a {
            After::Nothing => {}
            After::Stream(p) => producers.push(p),
            After::TorchCurrent(dev) => {
                let p = match torch_now {
                    Some(p) => p,
                    None => *torch_now.insert(torch_current_stream(py, dev)?),
                };
                producers.push(p);
            }
        }
    }
    // SAFETY: the producer streams are those the arrays' frameworks report (live while their
    // work is queued), the enqueue stream the caller's or a framework's current one.
    unsafe { shared.order_after(py, &producers, inp.stream)? };
    Ok(inp)
}

/// The column pointers of a readout.
pub(crate) fn column_bytes(r: &ColumnReadout<'_>, n: usize) -> Vec<ColumnBytes> {
    (0..n)
        .map(|i| ColumnBytes {
            ptr: r.column_bytes(i).map(|b| b.as_ptr() as usize).unwrap_or(0),
        })
        .collect()
}

/// Reads back a device-resident count and that many rows of one column (`dtype=`) or of
/// several (`columns=`), without a host synchronization.
#[pyclass(module = "sized_readback._native")]
pub struct Readback {
    rb: ManuallyDrop<ColumnReadback>,
    shared: Arc<Shared>,
    specs: Arc<Vec<ColSpec>>,
    columns: bool,
}

#[pymethods]
impl Readback {
    #[new]
    #[pyo3(signature = (capacity, dtype=None, columns=None, slots=2, device=0, transport="mapped", staged_copy="auto"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        capacity: i64,
        dtype: Option<&Bound<'_, PyAny>>,
        columns: Option<&Bound<'_, PyAny>>,
        slots: i64,
        device: i64,
        transport: &str,
        staged_copy: &str,
    ) -> PyResult<Self> {
        let (capacity, slots, device, transport) =
            check_settings(capacity, slots, device, transport)?;
        let staged_copy = check_staged_copy(staged_copy)?;
        let (specs, columns) = parse_columns(py, dtype, columns)?;
        let config = ReadbackConfig::new(capacity)
            .slots(slots)
            .transport(transport)
            .staged_copy(staged_copy);
        let (shared, schema, _restore) =
            open(py, device, &specs, |s| ColumnReadback::check(s, &config))?;
        let rb = ColumnReadback::new(&shared.ctx, &schema, config).py_err(py)?;
        Ok(Readback {
            rb: ManuallyDrop::new(rb),
            shared,
            specs: Arc::new(specs),
            columns,
        })
    }

    /// Enqueues the readback of `count` rows of `data` on `stream` and returns at once.
    #[pyo3(signature = (data, count, stream=None))]
    fn enqueue(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        count: &Bound<'_, PyAny>,
        stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Ticket> {
        let _restore = CtxGuard::save();
        self.shared.sweep();
        let inp = inputs(
            py,
            &self.shared,
            &self.specs,
            self.columns,
            data,
            count,
            stream,
        )?;
        // SAFETY: the sources and the count are device arrays of this device, read from their
        // frameworks (pointer, length and element size checked, and the addresses checked again
        // by the core); the enqueue stream waits for their producers (order_after, or the
        // producer's own __dlpack__(stream=)); `keep` holds them (and the stream object) until
        // the readback is known complete.
        let ticket = unsafe {
            self.rb
                .enqueue_raw_stream(inp.stream as CUstream, None, &inp.sources, inp.count)
        }
        .py_err(py)?;
        // SAFETY: the stream is live (it just took the pack).
        let done = unsafe { self.shared.record(py, inp.stream) }?;
        Ok(Ticket {
            seq: ticket.seq(),
            core: Some(Core::Pack(ticket)),
            keep: inp.keep,
            done: Some(done),
            shared: self.shared.clone(),
            specs: self.specs.clone(),
            columns: self.columns,
            state: State::Pending,
        })
    }

    /// Replaces the slots with ones of `capacity` rows (after a `CountExceedsCapacityError`:
    /// the device data is untouched, enqueue again). Tickets already handed out keep theirs.
    fn grow(&self, py: Python<'_>, capacity: i64) -> PyResult<()> {
        let _restore = CtxGuard::save();
        self.rb.grow(check_capacity(capacity)?).py_err(py)
    }

    /// Rows one slot holds.
    #[getter]
    fn capacity(&self) -> usize {
        self.rb.capacity()
    }
    /// Number of slots: readbacks in flight or held at once.
    #[getter]
    fn slots(&self) -> usize {
        self.rb.slots()
    }
    /// Slots held now (by tickets, readouts and their views).
    #[getter]
    fn slots_in_use(&self) -> usize {
        self.rb.slots_in_use()
    }
    /// The CUDA device ordinal.
    #[getter]
    fn device(&self) -> i32 {
        self.shared.device
    }
    /// `"mapped"` or `"staged"`.
    #[getter]
    fn transport(&self) -> &'static str {
        transport_name(self.rb.transport())
    }
    /// The staged transport's copy in use: `"sized"` (what the count needs, picked on the
    /// device; CUDA 12.8+ drivers), `"whole"` (the whole slot), or `None` (mapped).
    #[getter]
    fn staged_copy(&self) -> Option<&'static str> {
        staged_copy_name(self.rb.info().staged_copy)
    }
    /// The settings in effect and the slot layout, as a dict: capacity, slots, buckets,
    /// spill_capacity, transport, wait_mode, device, slot_bytes, column_offsets,
    /// trailer_offset, programmatic_launch.
    #[getter]
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        info_dict(py, &self.rb.info(), self.shared.device)
    }
    /// The dtype of one row of each column (one entry for a one-column readback).
    #[getter]
    fn dtypes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.specs.iter().map(|s| s.dtype.clone_ref(py)))
    }
    /// The column names (None for unnamed columns).
    #[getter]
    fn names(&self) -> Vec<Option<String>> {
        self.specs.iter().map(|s| s.name.clone()).collect()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Readback(capacity={}, {}, slots={}, device={}, transport={:?})",
            self.rb.capacity(),
            describe_columns(py, &self.specs, self.columns),
            self.rb.slots(),
            self.shared.device,
            transport_name(self.rb.transport())
        )
    }
}

impl Drop for Readback {
    fn drop(&mut self) {
        let _restore = CtxGuard::save();
        // SAFETY: dropped once, here.
        unsafe { ManuallyDrop::drop(&mut self.rb) };
    }
}

pub(crate) fn transport_name(t: Transport) -> &'static str {
    match t {
        Transport::Mapped => "mapped",
        Transport::Staged => "staged",
    }
}

pub(crate) fn describe_columns(py: Python<'_>, specs: &[ColSpec], columns: bool) -> String {
    let dt = |s: &ColSpec| {
        s.dtype
            .bind(py)
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_default()
    };
    if !columns {
        return format!("dtype={}", dt(&specs[0]));
    }
    let parts: Vec<String> = specs
        .iter()
        .map(|s| match &s.name {
            Some(n) => format!("{n:?}: {}", dt(s)),
            None => dt(s),
        })
        .collect();
    if specs.iter().any(|s| s.name.is_some()) {
        format!("columns={{{}}}", parts.join(", "))
    } else {
        format!("columns=[{}]", parts.join(", "))
    }
}

/// The core's ticket of either kind.
pub(crate) enum Core {
    Pack(srb::ColumnTicket),
    Append(srb::AppendTicket),
}

impl Core {
    fn wait_timeout(&self, t: Duration) -> srb::Result<ColumnReadout<'_>> {
        match self {
            Core::Pack(c) => c.wait_timeout(t),
            Core::Append(c) => c.wait_timeout(t),
        }
    }
    fn try_wait(&self) -> srb::Result<Option<ColumnReadout<'_>>> {
        match self {
            Core::Pack(c) => c.try_wait(),
            Core::Append(c) => c.try_wait(),
        }
    }
    fn slot(&self) -> usize {
        match self {
            Core::Pack(c) => c.slot(),
            Core::Append(c) => c.slot(),
        }
    }
    fn held(self) -> HeldSlot {
        match self {
            Core::Pack(c) => HeldSlot::new(Holder::Pack(c)),
            Core::Append(c) => HeldSlot::new(Holder::Append(c)),
        }
    }
}

pub(crate) enum State {
    Pending,
    Done(Py<Readout>),
    Failed(PyErr),
}

/// One enqueued readback: wait on it (`wait()`), poll it (`done()`).
#[pyclass(module = "sized_readback._native")]
pub struct Ticket {
    seq: u64,
    core: Option<Core>,
    /// What the readback reads, kept alive until it is known complete.
    keep: Vec<Py<PyAny>>,
    /// Completes with the readback (host-sequenced packs; None for appends).
    done: Option<CUevent>,
    shared: Arc<Shared>,
    specs: Arc<Vec<ColSpec>>,
    columns: bool,
    state: State,
}

// SAFETY: the CUevent is used only through `shared` (under its mutex) or its drop; the rest is
// Send + Sync.
unsafe impl Send for Ticket {}
// SAFETY: as above.
unsafe impl Sync for Ticket {}

impl Ticket {
    pub(crate) fn append(
        ticket: srb::AppendTicket,
        keep: Vec<Py<PyAny>>,
        shared: Arc<Shared>,
        specs: Arc<Vec<ColSpec>>,
        columns: bool,
    ) -> Self {
        Ticket {
            seq: ticket.seq(),
            core: Some(Core::Append(ticket)),
            keep,
            done: None,
            shared,
            specs,
            columns,
            state: State::Pending,
        }
    }

    /// The readback is complete: let go of what it read.
    fn finished(&mut self) {
        self.keep.clear();
        if let Some(e) = self.done.take() {
            self.shared.give_back(e);
        }
    }

    /// The readout of a complete readback (`count`, `seq`, its columns' addresses): the
    /// ticket's core moves into it, and the ticket is done.
    fn complete(
        &mut self,
        py: Python<'_>,
        (count, seq, cols): (usize, u64, Vec<ColumnBytes>),
    ) -> PyResult<Py<Readout>> {
        let core = self.core.take().expect("pending tickets hold their core");
        let r = Py::new(
            py,
            Readout::new(
                core.held(),
                count,
                seq,
                cols,
                self.specs.clone(),
                self.columns,
            ),
        )?;
        self.state = State::Done(r.clone_ref(py));
        Ok(r)
    }

    /// Turns a wait's outcome into the ticket's final state.
    fn settle(
        &mut self,
        py: Python<'_>,
        outcome: srb::Result<(usize, u64, Vec<ColumnBytes>)>,
    ) -> PyResult<Py<Readout>> {
        self.finished();
        match outcome {
            Ok(facts) => self.complete(py, facts),
            Err(e) => {
                let overflowed = matches!(e, srb::Error::AppendOverflow { .. });
                let err = crate::errors::to_py(py, e);
                if !overflowed {
                    // The slot holds nothing worth keeping.
                    self.core = None;
                }
                self.state = State::Failed(err.clone_ref(py));
                Err(err)
            }
        }
    }
}

fn outcome(
    r: srb::Result<ColumnReadout<'_>>,
    n: usize,
) -> srb::Result<(usize, u64, Vec<ColumnBytes>)> {
    r.map(|r| (r.count(), r.seq(), column_bytes(&r, n)))
}

#[pymethods]
impl Ticket {
    /// Blocks (without the GIL) until the readback is complete and returns its `Readout`;
    /// with `timeout` (seconds), raises `ReadbackTimeoutError` after it (the ticket stays valid).
    #[pyo3(signature = (timeout=None))]
    fn wait(&mut self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<Readout>> {
        match &self.state {
            State::Done(r) => return Ok(r.clone_ref(py)),
            State::Failed(e) => return Err(e.clone_ref(py)),
            State::Pending => {}
        }
        let deadline = deadline(timeout)?;
        let _restore = CtxGuard::save();
        let n = self.specs.len();
        let start = Instant::now();
        loop {
            let slice = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()).min(WAIT_SLICE),
                None => WAIT_SLICE,
            };
            let core = self.core.as_ref().expect("pending tickets hold their core");
            let r = py.detach(|| outcome(core.wait_timeout(slice), n));
            match r {
                Err(srb::Error::Timeout { .. }) => {
                    slice_ran_out(py, deadline, start)?;
                }
                other => return self.settle(py, other),
            }
        }
    }

    /// Whether the readback is complete (`wait()` then returns at once, or raises its error).
    fn done(&mut self, py: Python<'_>) -> PyResult<bool> {
        if !matches!(self.state, State::Pending) {
            return Ok(true);
        }
        let _restore = CtxGuard::save();
        let n = self.specs.len();
        let core = self.core.as_ref().expect("pending tickets hold their core");
        match core.try_wait() {
            Ok(None) => Ok(false),
            Ok(Some(r)) => {
                let o = outcome(Ok(r), n);
                self.settle(py, o).map(|_| true)
            }
            Err(e) => {
                let _ = self.settle(py, Err(e));
                Ok(true)
            }
        }
    }

    /// After an `AppendOverflowError`: the first `capacity` rows the kernel appended (in no
    /// particular order), as a `Readout`.
    fn partial(&mut self, py: Python<'_>) -> PyResult<Py<Readout>> {
        if let State::Done(r) = &self.state {
            return Ok(r.clone_ref(py));
        }
        let Some(Core::Append(t)) = &self.core else {
            return Err(PyValueError::new_err(
                "partial() is for append tickets whose kernel overflowed the capacity",
            ));
        };
        let n = self.specs.len();
        let _restore = CtxGuard::save();
        let r = py.detach(|| outcome(t.partial(), n));
        let facts = r.py_err(py)?;
        self.finished();
        self.complete(py, facts)
    }

    /// The readback's sequence number (1, 2, 3, ... per readback object).
    #[getter]
    fn seq(&self) -> u64 {
        self.seq
    }

    /// The slot it occupies (None once the ticket no longer holds one).
    #[getter]
    fn slot(&self) -> Option<usize> {
        self.core.as_ref().map(Core::slot)
    }

    fn __repr__(&mut self, py: Python<'_>) -> String {
        let state = match &self.state {
            State::Pending => match self.done(py) {
                Ok(true) => "complete".to_string(),
                Ok(false) => "in flight".to_string(),
                Err(_) => "failed".to_string(),
            },
            State::Done(_) => "complete".to_string(),
            State::Failed(e) => format!("failed: {e}"),
        };
        format!("Ticket(seq={}, {state})", self.seq)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let Some(core) = self.core.take() else {
            drop(std::mem::take(&mut self.keep));
            if let Some(e) = self.done.take() {
                self.shared.give_back(e);
            }
            return;
        };
        let _restore = CtxGuard::save();
        let complete = self.keep.is_empty() || !matches!(core.try_wait(), Ok(None));
        // The slot is released now; the core orders its next use after this readback.
        drop(core);
        let keep = std::mem::take(&mut self.keep);
        match (complete, self.done.take()) {
            (true, e) => {
                if let Some(e) = e {
                    self.shared.give_back(e);
                }
                drop(keep);
            }
            // Still in flight: its arrays stay alive until the event says it is done (the slot
            // itself is released now; the core orders its next use after this readback).
            (false, Some(e)) => self.shared.defer(e, keep),
            (false, None) => drop(keep),
        }
    }
}

/// `timeout` seconds from now (None: no limit).
/// After one slice of a wait ran out (the GIL released meanwhile): `ReadbackTimeoutError` for
/// the whole wait since `start` once `deadline` has passed, else a chance for signals
/// (Ctrl-C) before the next slice.
pub(crate) fn slice_ran_out(
    py: Python<'_>,
    deadline: Option<Instant>,
    start: Instant,
) -> PyResult<()> {
    if deadline.is_some_and(|d| Instant::now() >= d) {
        return Err(crate::errors::to_py(
            py,
            srb::Error::Timeout {
                waited: start.elapsed(),
            },
        ));
    }
    py.check_signals()
}

pub(crate) fn deadline(timeout: Option<f64>) -> PyResult<Option<Instant>> {
    match timeout {
        None => Ok(None),
        Some(t) if t.is_finite() && t >= 0.0 => {
            Ok(Instant::now().checked_add(Duration::from_secs_f64(t)))
        }
        Some(t) if t == f64::INFINITY => Ok(None),
        Some(t) => Err(PyValueError::new_err(format!(
            "timeout must be a non-negative number of seconds, not {t}"
        ))),
    }
}
