//! `Readback` and its `Ticket`: the host-sequenced readback of one or several columns.
use crate::array::{acquire, from_cai, reads_cai, After, DeviceArray};
use crate::errors::{make, IntoPy};
use crate::py_util::{info_dict, torch_current_stream};
use crate::readout::{ColumnBytes, HeldSlot, Holder, Readout};
use crate::spec::{parse_columns, ColSpec};
use crate::stream::{resolve, CtxGuard, Pool, Shared};
use crate::wait_clock::WaitClock;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use srb::cudarc::driver::sys::CUstream;
use srb::{
    ColumnReadback, ColumnReadout, ColumnSchema, ColumnSource, CountKind, RawCount, ReadbackConfig,
    StagedCopy, Transport,
};
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a readback reads, kept alive until it is known complete: the arrays, a DLPack
/// capsule, the stream object. The common enqueue (data, count, maybe a capsule or a stream)
/// fits inline, so a ticket allocates nothing for it.
#[derive(Default)]
pub(crate) struct Keep {
    inline: [Option<Py<PyAny>>; 4],
    more: Vec<Py<PyAny>>,
}

impl Keep {
    pub(crate) fn push(&mut self, o: Py<PyAny>) {
        match self.inline.iter_mut().find(|s| s.is_none()) {
            Some(slot) => *slot = Some(o),
            None => self.more.push(o),
        }
    }
    pub(crate) fn len(&self) -> usize {
        self.inline.iter().filter(|s| s.is_some()).count() + self.more.len()
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.inline[0].is_none() && self.more.is_empty()
    }
    pub(crate) fn clear(&mut self) {
        *self = Keep::default();
    }
    pub(crate) fn into_vec(self) -> Vec<Py<PyAny>> {
        self.inline.into_iter().flatten().chain(self.more).collect()
    }
}

impl Extend<Py<PyAny>> for Keep {
    fn extend<I: IntoIterator<Item = Py<PyAny>>>(&mut self, it: I) {
        for o in it {
            self.push(o);
        }
    }
}

/// `transport="auto"`: an enqueue goes to the staged slots (one DMA of the whole slot) when the
/// count last read back filled at least this many bytes...
pub(crate) const AUTO_STAGED_MIN_BYTES: usize = 4 << 20;
/// ... and at least this share of the capacity; otherwise to the mapped slots (the pack writes
/// exactly `count` rows into pinned host memory). The staged copy moves the whole slot, so it
/// wins only when the count nearly fills it: measured on an H200 from PyTorch at 8.4 MB,
/// mapped moved 37.1 GB/s and the staged copy 42.8, which favours staged past 37.1 / 42.8 =
/// 0.87 of the slot (those rates include the host's enqueue and wait: python/PERF.md); below a
/// few MB the copy's fixed cost (a second operation on the stream) outweighs the difference.
/// `python/bench/bench.py` measures mapped and auto at every size and staged at the capacity.
pub(crate) const AUTO_STAGED_MIN_FILL: f64 = 0.87;

/// The rows from which an auto readback of `capacity` rows of `row_bytes` bytes goes staged.
fn auto_threshold(capacity: usize, row_bytes: usize) -> usize {
    let by_bytes = AUTO_STAGED_MIN_BYTES.div_ceil(row_bytes.max(1));
    let by_fill = (capacity as f64 * AUTO_STAGED_MIN_FILL).ceil() as usize;
    by_bytes.max(by_fill).max(1)
}

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
                "transport must be \"mapped\" or \"staged\" (or \"auto\" for a Readback), not {t:?}"
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
    if a.numel() != Some(1) {
        return Err(PyValueError::new_err(format!(
            "the count must be one element (a 0-d array), not an array of shape {:?}",
            a.shape
        )));
    }
    let signed = match a.kind {
        b'i' => Some(true),
        b'u' => Some(false),
        _ => None,
    };
    CountKind::ALL
        .into_iter()
        .find(|k| Some(k.is_signed()) == signed && k.size() == a.itemsize)
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "the count must be {}, not {}",
                numpy_names(),
                a.type_name()
            ))
        })
}

/// A count kind's numpy dtype name (`int32`, `uint64`, ...), from its width and signedness.
fn numpy_name(k: CountKind) -> String {
    let sign = if k.is_signed() { "" } else { "u" };
    format!("{sign}int{}", 8 * k.size())
}

/// Every count kind's numpy name, in words: "int32, uint32, int64 or uint64".
fn numpy_names() -> String {
    let names: Vec<String> = CountKind::ALL.into_iter().map(numpy_name).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.concat(),
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
    pub(crate) keep: Keep,
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
    // Named for error messages; one column's name needs no allocation.
    let what = |i: usize, spec: &ColSpec| -> std::borrow::Cow<'static, str> {
        if columns {
            format!("data for {}", spec.label(i)).into()
        } else {
            "the data".into()
        }
    };
    // With no stream given, a CUDA Array Interface object's own `stream` entry chooses the
    // enqueue stream: its interface is read once, here, and serves for both.
    let mut first_cai = None;
    if stream.is_none_or(|s| s.is_none()) {
        if let Some(o) = objs.first().filter(|o| reads_cai(py, o)) {
            match o.getattr(intern!(py, "__cuda_array_interface__")) {
                Ok(cai) => first_cai = Some(from_cai(py, &cai, &what(0, &specs[0]))?),
                // A stale type cache entry (forgotten now): `acquire` probes the object.
                Err(e) => drop(crate::py_util::stale_accessor(o, e)?),
            }
        }
    }
    let cai_stream = first_cai.as_ref().map(|a| match a.after {
        After::Stream(1) | After::Nothing => 0,
        After::Stream(s) => s,
        After::TorchCurrent(_) => 0,
    });
    let resolved = resolve(py, stream, objs.first(), device, cai_stream)?;
    let s = resolved.handle;
    let mut keep = Keep::default();
    keep.extend(resolved.keep);
    let mut sources = Vec::with_capacity(objs.len());
    let mut afters = Vec::with_capacity(objs.len() + 1);
    for (i, (o, spec)) in objs.iter().zip(specs).enumerate() {
        let what = what(i, spec);
        let a = match first_cai.take().filter(|_| i == 0) {
            Some(a) => {
                keep.push(o.clone().unbind());
                a
            }
            None => acquire(py, o, s, device, &what, &mut keep)?,
        };
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
    /// Whether `transport="auto"`.
    auto: bool,
    /// `transport="auto"`: the staged slots beside the mapped ones (`rb`), made only while the
    /// threshold (`staged_from`) is within the capacity, so a readback whose counts can never
    /// reach it allocates none; replaced by `grow`. Cloned out of the lock by each enqueue
    /// (tickets hold their slots through the core, not through this).
    staged: Mutex<Option<Arc<ColumnReadback>>>,
    /// `transport="auto"`: the staged set's copy (`staged_copy=`), for the sets `grow` makes.
    staged_copy: StagedCopy,
    /// `transport="auto"`: the last count from which enqueues go staged.
    staged_from: AtomicUsize,
    /// Bumped by every `grow`: the slot sets of tickets handed out before are others.
    generation: AtomicU64,
    /// The last `seq` handed out: one numbering for both slot sets of `transport="auto"`
    /// (the core numbers each set on its own; its numbers stay internal).
    next_seq: AtomicU64,
    shared: Arc<Shared>,
    specs: Arc<Vec<ColSpec>>,
    columns: bool,
}

impl Readback {
    /// `transport="auto"`'s staged set, if made.
    fn staged_set(&self) -> Option<Arc<ColumnReadback>> {
        self.staged
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The core's enqueue and the ticket. An enqueue that finds every slot of its set held
    /// while dropped tickets of that set (same transport, same generation) still hold some
    /// waits for the oldest of those to complete (in slices, Ctrl-C working), then tries again.
    ///
    /// # Safety
    /// As [`ColumnReadback::enqueue_raw_stream`]; the context is bound.
    unsafe fn pack(
        &self,
        py: Python<'_>,
        stream: usize,
        sources: &[ColumnSource],
        count: RawCount,
        keep: Keep,
    ) -> PyResult<Ticket> {
        // transport="auto": the set the last count chose, then the other one if that set is
        // full.
        let staged = if self.auto { self.staged_set() } else { None };
        let (first, second): (&ColumnReadback, Option<&ColumnReadback>) = match &staged {
            Some(st)
                if self.shared.last_rows.load(Ordering::Relaxed)
                    >= self.staged_from.load(Ordering::Relaxed) =>
            {
                (st, Some(&self.rb))
            }
            Some(st) => (&self.rb, Some(st)),
            None => (&self.rb, None),
        };
        let generation = self.generation.load(Ordering::Relaxed);
        let pool = |rb: &ColumnReadback| Pool {
            staged: rb.transport() == Transport::Staged,
            generation,
        };
        loop {
            let mut exhausted = None;
            for rb in std::iter::once(first).chain(second) {
                // SAFETY: per this function's contract.
                let r = unsafe { rb.enqueue_raw_stream(stream as CUstream, None, sources, count) };
                match r {
                    Ok(ticket) => {
                        return Ok(Ticket {
                            pool: pool(rb),
                            transport: transport_name(rb.transport()),
                            seq: self.next_seq.fetch_add(1, Ordering::Relaxed) + 1,
                            core: Some(Core::Pack(ticket)),
                            keep,
                            shared: self.shared.clone(),
                            specs: self.specs.clone(),
                            columns: self.columns,
                            state: State::Pending,
                        });
                    }
                    Err(e @ srb::Error::SlotsExhausted { .. }) => {
                        exhausted.get_or_insert(e);
                    }
                    Err(e) => return Err(crate::errors::to_py(py, e)),
                }
            }
            // Every set full: wait for a dropped ticket of the chosen set, else of the other.
            let freed = self.shared.free_oldest(py, pool(first))?
                || match second {
                    Some(rb) => self.shared.free_oldest(py, pool(rb))?,
                    None => false,
                };
            if !freed {
                let e = exhausted.expect("every set was tried");
                return Err(crate::errors::to_py(py, e));
            }
            self.shared.bind(py)?;
        }
    }
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
        let auto = transport == "auto";
        let (capacity, slots, device, transport) = check_settings(
            capacity,
            slots,
            device,
            if auto { "mapped" } else { transport },
        )?;
        let staged_copy = check_staged_copy(staged_copy)?;
        let (specs, columns) = parse_columns(py, dtype, columns)?;
        // Under transport="auto", staged_copy is the staged set's: the mapped set copies
        // nothing, and would refuse an explicit "sized".
        let config = ReadbackConfig::new(capacity)
            .slots(slots)
            .transport(transport)
            .staged_copy(if auto { StagedCopy::Auto } else { staged_copy });
        let row_bytes = specs.iter().map(|s| s.elem_size).sum();
        let staged_from = auto_threshold(capacity, row_bytes);
        // The staged set only where a count can reach the threshold.
        let staged_config = (auto && staged_from <= capacity).then(|| {
            config
                .clone()
                .transport(Transport::Staged)
                .staged_copy(staged_copy)
        });
        let (shared, schema, _restore) = open(py, device, &specs, |s| {
            ColumnReadback::check(s, &config)?;
            staged_config
                .as_ref()
                .map_or(Ok(()), |c| ColumnReadback::check(s, c))
        })?;
        let rb = ColumnReadback::new(&shared.ctx, &schema, config).py_err(py)?;
        let staged = match staged_config {
            Some(c) => Some(Arc::new(
                ColumnReadback::new(&shared.ctx, &schema, c).py_err(py)?,
            )),
            None => None,
        };
        Ok(Readback {
            rb: ManuallyDrop::new(rb),
            auto,
            staged: Mutex::new(staged),
            staged_copy,
            staged_from: AtomicUsize::new(staged_from),
            generation: AtomicU64::new(0),
            next_seq: AtomicU64::new(0),
            shared,
            specs: Arc::new(specs),
            columns,
        })
    }

    /// Enqueues the readback of `count` rows of `data` on `stream` and returns without
    /// waiting for the device, unless every slot is held and some by tickets dropped in
    /// flight: then it waits (GIL released, Ctrl-C working) for the oldest of those.
    /// `keep=False` holds no reference to the arrays or the stream: for memory whose reuse the
    /// caller orders after the pack (PyTorch's caching allocator on the enqueue stream).
    #[pyo3(signature = (data, count, stream=None, keep=true))]
    fn enqueue(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        count: &Bound<'_, PyAny>,
        stream: Option<&Bound<'_, PyAny>>,
        keep: bool,
    ) -> PyResult<Ticket> {
        let _restore = CtxGuard::save_unless(self.shared.ctx.cu_ctx());
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
        let held = if keep { inp.keep } else { Keep::default() };
        // SAFETY: the sources and the count are device arrays of this device, read from their
        // frameworks (pointer, length and element size checked; the core checks again that each
        // column's first address and the count's are device memory of this context); the enqueue stream waits for their producers (order_after, or the
        // producer's own __dlpack__(stream=)); `keep` holds them (and the stream object) until
        // the readback is known complete, or with keep=False the caller orders their reuse
        // after the pack.
        unsafe { self.pack(py, inp.stream, &inp.sources, inp.count, held) }
    }

    /// The enqueue on pre-read addresses, for measuring the binding's own cost and for callers
    /// that hold raw handles: `ptrs[i]` the device address of column `i`'s first row,
    /// `rows[i]` its rows, `count_ptr` the count's device address (`count_kind` a count
    /// dtype's numpy name, `"int32"`, `"uint64"`, ...), `stream` a `cudaStream_t` as an int (0:
    /// the legacy default stream). Nothing is kept alive and no producer stream is waited
    /// for: the caller keeps the memory allocated and unwritten until the readback completes,
    /// and enqueues on the producer's stream. The core checks only that the count's address
    /// and each column's first address are device memory of this context, and the stream's
    /// context: not that `rows[i]` rows fit in the allocation at `ptrs[i]` (a wrong `rows`
    /// reads past it).
    #[pyo3(signature = (ptrs, rows, count_ptr, count_kind="int32", stream=0))]
    fn _enqueue_raw(
        &self,
        py: Python<'_>,
        ptrs: Vec<u64>,
        rows: Vec<usize>,
        count_ptr: u64,
        count_kind: &str,
        stream: usize,
    ) -> PyResult<Ticket> {
        if ptrs.len() != rows.len() || ptrs.len() != self.specs.len() {
            return Err(PyValueError::new_err(format!(
                "one address and one row count per column ({} columns), not {} and {}",
                self.specs.len(),
                ptrs.len(),
                rows.len()
            )));
        }
        let kind = CountKind::ALL
            .into_iter()
            .find(|&k| numpy_name(k) == count_kind)
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "count_kind must be {}, not {count_kind:?}",
                    numpy_names()
                ))
            })?;
        let sources: Vec<ColumnSource> = ptrs
            .iter()
            .zip(&rows)
            .map(|(&ptr, &len)| ColumnSource { ptr, len })
            .collect();
        let _restore = CtxGuard::save_unless(self.shared.ctx.cu_ctx());
        self.shared.sweep();
        self.shared.bind(py)?;
        // SAFETY: the caller's contract above (documented as such: that includes the extent of
        // each column, which nothing checks); the core checks that the count's and each
        // column's first address are device memory of this context and the stream belongs to
        // it.
        unsafe {
            self.pack(
                py,
                stream,
                &sources,
                RawCount::new(count_ptr, kind),
                Keep::default(),
            )
        }
    }

    /// Measurement only (python/bench/profile_binding.py): the host time of each phase of
    /// `enqueue(data, count)`, timed inside the binding over `reps` enqueues of these arrays
    /// on PyTorch's (or the arrays' framework's) current stream, each waited for before the
    /// next. A dict of nanoseconds per call (median): `ctx_guard` (save and restore the
    /// current context), `sweep` (dropped tickets), `parse` (the arrays, the count and the
    /// stream, as `enqueue` reads them), `stream_lookup` (PyTorch's current stream alone, part
    /// of `parse` for tensors), `bind_order` (bind the context, order after producers' streams),
    /// `core_enqueue` (the core's checks, launch and slot event), `ticket` (the Python ticket
    /// object, made and dropped), `event_record` (one `cuEventRecord`: what a completion event
    /// of its own per enqueue would cost, for reference). `before`, if given, is called
    /// (untimed) before each enqueue: e.g. a producer's launches, to time the enqueue behind a
    /// busy stream as the benchmark's latency loop does.
    #[pyo3(signature = (data, count, reps=1000, before=None))]
    fn _profile<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        count: &Bound<'py, PyAny>,
        reps: usize,
        before: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        use srb::cudarc::driver::sys;
        let reps = reps.max(1);
        let mut t: [Vec<u64>; 8] = Default::default();
        let ns = |a: Instant| a.elapsed().as_nanos() as u64;
        let _restore = CtxGuard::save();
        self.shared.bind(py)?;
        let mut ev: sys::CUevent = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; the context is bound.
        let status = unsafe {
            sys::cuEventCreate(&mut ev, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32)
        };
        // Destroyed on every way out (errors and early returns included).
        let _ev_guard = (status == sys::CUresult::CUDA_SUCCESS).then(|| ProfileEvent {
            ev,
            ctx: self.shared.ctx.cu_ctx(),
        });
        if status != sys::CUresult::CUDA_SUCCESS {
            return Err(crate::errors::to_py(
                py,
                srb::Error::Cuda {
                    call: "cuEventCreate",
                    source: status.result().unwrap_err(),
                },
            ));
        }
        let mut result = Ok(());
        for _ in 0..reps {
            if let Some(f) = before {
                if let Err(e) = f.call0() {
                    result = Err(e);
                    break;
                }
            }
            let a = Instant::now();
            drop(CtxGuard::save());
            t[0].push(ns(a));
            let a = Instant::now();
            self.shared.sweep();
            t[1].push(ns(a));
            let a = Instant::now();
            let inp = match parse_inputs(
                py,
                self.shared.device,
                &self.specs,
                self.columns,
                data,
                count,
                None,
            ) {
                Ok(i) => i,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            t[2].push(ns(a));
            if inp.torch_current.is_some() {
                let a = Instant::now();
                let _ = torch_current_stream(py, self.shared.device);
                t[3].push(ns(a));
            }
            let a = Instant::now();
            let mut producers = Vec::new();
            for &af in &inp.afters {
                if let After::Stream(p) = af {
                    producers.push(p);
                }
            }
            let ordered = self.shared.bind(py).and_then(|()| {
                // SAFETY: as in `inputs`: the producers' and the enqueue stream are live.
                unsafe { self.shared.order_after(py, &producers, inp.stream) }
            });
            t[4].push(ns(a));
            if let Err(e) = ordered {
                result = Err(e);
                break;
            }
            let a = Instant::now();
            // SAFETY: as in `enqueue`; `inp.keep` holds the arrays until the wait below.
            let r = unsafe {
                self.rb
                    .enqueue_raw_stream(inp.stream as CUstream, None, &inp.sources, inp.count)
            };
            t[5].push(ns(a));
            let ticket = match r {
                Ok(tk) => tk,
                Err(e) => {
                    result = Err(crate::errors::to_py(py, e));
                    break;
                }
            };
            let a = Instant::now();
            // SAFETY: the stream is live (it just took the pack); ev is a live event.
            let _ = unsafe { sys::cuEventRecord(ev, inp.stream as CUstream) };
            t[7].push(ns(a));
            let _ = py.detach(|| ticket.wait().map(|r| r.count()));
            let a = Instant::now();
            let obj = Py::new(
                py,
                Ticket {
                    pool: Pool {
                        staged: self.rb.transport() == Transport::Staged,
                        generation: self.generation.load(Ordering::Relaxed),
                    },
                    transport: transport_name(self.rb.transport()),
                    seq: ticket.seq(),
                    core: Some(Core::Pack(ticket)),
                    keep: inp.keep,
                    shared: self.shared.clone(),
                    specs: self.specs.clone(),
                    columns: self.columns,
                    state: State::Pending,
                },
            )?;
            drop(obj);
            t[6].push(ns(a));
        }
        result?;
        let d = PyDict::new(py);
        let names = [
            "ctx_guard",
            "sweep",
            "parse",
            "stream_lookup",
            "bind_order",
            "core_enqueue",
            "ticket",
            "event_record",
        ];
        for (name, v) in names.iter().zip(t.iter_mut()) {
            if v.is_empty() {
                continue;
            }
            v.sort_unstable();
            d.set_item(*name, v[v.len() / 2])?;
        }
        d.set_item("reps", reps)?;
        Ok(d)
    }

    /// Replaces the slots with ones of `capacity` rows (after a `CountExceedsCapacityError`:
    /// the device data is untouched, enqueue again). Tickets already handed out keep theirs.
    fn grow(&self, py: Python<'_>, capacity: i64) -> PyResult<()> {
        let _restore = CtxGuard::save();
        let capacity = check_capacity(capacity)?;
        if !self.auto {
            self.rb.grow(capacity).py_err(py)?;
            self.generation.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        // transport="auto": the new staged set first (if the new capacity lets a count reach
        // the threshold), then the mapped slots. Either failing leaves both sets as they were.
        let row_bytes = self.specs.iter().map(|s| s.elem_size).sum();
        let staged_from = auto_threshold(capacity, row_bytes);
        let new_staged = if staged_from <= capacity {
            let mut schema = ColumnSchema::new();
            for s in self.specs.iter() {
                schema.raw_column(s.elem_size);
            }
            let config = ReadbackConfig::new(capacity)
                .slots(self.rb.slots())
                .transport(Transport::Staged)
                .staged_copy(self.staged_copy);
            Some(Arc::new(
                ColumnReadback::new(&self.shared.ctx, &schema, config).py_err(py)?,
            ))
        } else {
            None
        };
        self.rb.grow(capacity).py_err(py)?;
        let old = std::mem::replace(
            &mut *self.staged.lock().unwrap_or_else(|p| p.into_inner()),
            new_staged,
        );
        self.staged_from.store(staged_from, Ordering::Relaxed);
        self.generation.fetch_add(1, Ordering::Relaxed);
        // Freed outside the lock, with the caller's context restored after.
        drop(old);
        Ok(())
    }

    /// Rows one slot holds.
    #[getter]
    fn capacity(&self) -> usize {
        self.rb.capacity()
    }
    /// Number of slots: readbacks in flight or held at once (per set for `transport="auto"`,
    /// which has a set of each transport: up to twice this many in all).
    #[getter]
    fn slots(&self) -> usize {
        self.rb.slots()
    }
    /// Slots held now: by tickets, readouts and their views, and by tickets dropped while
    /// their readback was in flight, until the next enqueue sees it complete. For
    /// `transport="auto"`, of both sets together.
    #[getter]
    fn slots_in_use(&self) -> usize {
        self.rb.slots_in_use() + self.staged_set().map_or(0, |s| s.slots_in_use())
    }
    /// For `transport="auto"`: the count from which an enqueue goes to the staged slots (the
    /// last count read back decides); None for a fixed transport.
    #[getter]
    fn auto_staged_from(&self) -> Option<usize> {
        self.auto.then(|| self.staged_from.load(Ordering::Relaxed))
    }
    /// The CUDA device ordinal.
    #[getter]
    fn device(&self) -> i32 {
        self.shared.device
    }
    /// `"mapped"`, `"staged"` or `"auto"`.
    #[getter]
    fn transport(&self) -> &'static str {
        if self.auto {
            return "auto";
        }
        transport_name(self.rb.transport())
    }
    /// The staged transport's copy in use: `"sized"` (what the count needs, picked on the
    /// device; CUDA 12.8+ drivers), `"whole"` (the whole slot), or `None` (mapped).
    #[getter]
    fn staged_copy(&self) -> Option<&'static str> {
        // Under transport="auto", the staged slots' copy (None while none are allocated).
        if self.auto {
            return self
                .staged_set()
                .and_then(|st| staged_copy_name(st.info().staged_copy));
        }
        staged_copy_name(self.rb.info().staged_copy)
    }
    /// The settings in effect and the slot layout, as a dict: capacity, slots, buckets,
    /// spill_capacity, transport, wait_mode, device, slot_bytes, column_offsets,
    /// trailer_offset, programmatic_launch (of the mapped slots for `transport="auto"`, with
    /// auto_staged_slots: the staged slots allocated, 0 while the threshold is out of reach).
    #[getter]
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = info_dict(py, &self.rb.info(), self.shared.device)?;
        if self.auto {
            let staged = self.staged_set();
            d.set_item("transport", "auto")?;
            d.set_item(
                "staged_copy",
                staged
                    .as_ref()
                    .and_then(|st| staged_copy_name(st.info().staged_copy)),
            )?;
            d.set_item("auto_staged_slots", staged.map_or(0, |s| s.slots()))?;
        }
        Ok(d)
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
            self.transport()
        )
    }
}

impl Drop for Readback {
    fn drop(&mut self) {
        let _restore = CtxGuard::save();
        // SAFETY: dropped once, here.
        unsafe { ManuallyDrop::drop(&mut self.rb) };
        drop(
            self.staged
                .get_mut()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        );
    }
}

/// `_profile`'s event, destroyed when it goes out of scope (after its last record completes),
/// with its context bound: the caller's `CtxGuard`, made before, restores the caller's after.
struct ProfileEvent {
    ev: srb::cudarc::driver::sys::CUevent,
    ctx: srb::cudarc::driver::sys::CUcontext,
}

impl Drop for ProfileEvent {
    fn drop(&mut self) {
        use srb::cudarc::driver::sys;
        // SAFETY: a live event of the live context `ctx` (the readback holds it), no longer
        // used by anyone else; a failed bind leaves the destroy to fail harmlessly.
        unsafe {
            let _ = sys::cuCtxSetCurrent(self.ctx);
            let _ = sys::cuEventSynchronize(self.ev);
            let _ = sys::cuEventDestroy_v2(self.ev);
        }
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
    pub(crate) fn wait_timeout(&self, t: Duration) -> srb::Result<ColumnReadout<'_>> {
        match self {
            Core::Pack(c) => c.wait_timeout(t),
            Core::Append(c) => c.wait_timeout(t),
        }
    }
    pub(crate) fn try_wait(&self) -> srb::Result<Option<ColumnReadout<'_>>> {
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
    /// The slot set it took (a dropped ticket frees a slot of that set only).
    pool: Pool,
    /// The slots' transport (for `transport="auto"`, the one this enqueue took).
    transport: &'static str,
    seq: u64,
    core: Option<Core>,
    /// What the readback reads, kept alive until it is known complete.
    keep: Keep,
    shared: Arc<Shared>,
    specs: Arc<Vec<ColSpec>>,
    columns: bool,
    state: State,
}

impl Ticket {
    pub(crate) fn append(
        transport: &'static str,
        ticket: srb::AppendTicket,
        keep: Keep,
        shared: Arc<Shared>,
        specs: Arc<Vec<ColSpec>>,
        columns: bool,
    ) -> Self {
        Ticket {
            pool: Pool::default(),
            transport,
            seq: ticket.seq(),
            core: Some(Core::Append(ticket)),
            keep,
            shared,
            specs,
            columns,
            state: State::Pending,
        }
    }

    /// The readback is complete: let go of what it read.
    fn finished(&mut self) {
        self.keep.clear();
    }

    /// The readout of a complete readback (`count`, `seq`, its columns' addresses): the
    /// ticket's core moves into it, and the ticket is done.
    fn complete(
        &mut self,
        py: Python<'_>,
        (count, _core_seq, cols): (usize, u64, Vec<ColumnBytes>),
    ) -> PyResult<Py<Readout>> {
        // The readout's seq is the ticket's (the readback's own numbering), not the core's.
        let seq = self.seq;
        let core = self.core.take().expect("pending tickets hold their core");
        self.shared.last_rows.store(count, Ordering::Relaxed);
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
        let clock = WaitClock::start(timeout)?;
        let _restore = CtxGuard::save_unless(self.shared.ctx.cu_ctx());
        let n = self.specs.len();
        // Often complete already (the pack is short): then no GIL release.
        let ready = {
            let core = self.core.as_ref().expect("pending tickets hold their core");
            match core.try_wait() {
                Ok(None) => None,
                Ok(Some(r)) => Some(outcome(Ok(r), n)),
                Err(e) => Some(Err(e)),
            }
        };
        if let Some(o) = ready {
            return self.settle(py, o);
        }
        loop {
            let slice = clock.slice();
            let core = self.core.as_ref().expect("pending tickets hold their core");
            let r = py.detach(|| outcome(core.wait_timeout(slice), n));
            match r {
                Err(srb::Error::Timeout { .. }) => clock.slice_ran_out(py)?,
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

    /// The readback's sequence number (1, 2, 3, ... per readback object, one numbering for
    /// both slot sets of `transport="auto"`).
    #[getter]
    fn seq(&self) -> u64 {
        self.seq
    }

    /// `"mapped"` or `"staged"`: how this readback reaches host memory (a `transport="auto"`
    /// readback chooses per enqueue).
    #[getter]
    fn transport(&self) -> &'static str {
        self.transport
    }

    /// The slot it occupies (None once the ticket no longer holds one), in the slot set of
    /// its `transport` (`transport="auto"` has a set of each, numbered from 0 each).
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
        let keep = std::mem::take(&mut self.keep);
        let Some(core) = self.core.take() else {
            drop(keep);
            return;
        };
        let _restore = CtxGuard::save();
        // Still in flight and reading Python-owned memory: the slot and the arrays stay held
        // until it completes (the next enqueue polls for that). An append reads no array
        // (`keep` holds its stream object only).
        let in_flight = !keep.is_empty()
            && matches!(core, Core::Pack(_))
            && matches!(core.try_wait(), Ok(None));
        if in_flight {
            self.shared.defer(self.pool, core, keep);
        } else {
            drop(core);
            drop(keep);
        }
    }
}
