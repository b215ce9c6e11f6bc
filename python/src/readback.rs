//! `Readback`: the host-sequenced readback of one or several columns.
use crate::deferred::Pool;
use crate::driver::CtxGuard;
use crate::errors::{to_py, IntoPy};
use crate::info::{self, AutoFacts, Facts};
use crate::inputs::{count_kind_named, inputs};
use crate::keep::Keep;
use crate::profile;
use crate::settings::{
    check_capacity, check_settings, check_staged_copy, transport_name, IntSetting,
};
use crate::shared::{open, Shared};
use crate::spec::{describe_columns, parse_columns, ColSpec};
use crate::ticket::Ticket;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use srb::cudarc::driver::sys::CUstream;
use srb::{ColumnReadback, ColumnSource, RawCount, ReadbackConfig, Transport};
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Reads back a device-resident count and that many rows of one column (`dtype=`) or of
/// several (`columns=`), without a host synchronization.
#[pyclass(module = "sized_readback._native")]
pub struct Readback {
    /// The slots (under `transport="auto"` the core's two sets, `Transport::Auto`).
    rb: ManuallyDrop<ColumnReadback>,
    /// Bumped by every `grow`: the slot sets of tickets handed out before are others.
    generation: AtomicU64,
    /// The last `seq` handed out: the binding's own numbering of its tickets (the core's
    /// tickets are numbered by their readback too; these stay the binding's, from 1).
    next_seq: AtomicU64,
    shared: Arc<Shared>,
    specs: Arc<Vec<ColSpec>>,
    columns: bool,
}

impl Readback {
    /// The slot set `rb` of this readback's current generation.
    fn pool(&self, transport: Transport) -> Pool {
        Pool {
            staged: transport == Transport::Staged,
            generation: self.generation.load(Ordering::Relaxed),
        }
    }

    fn transport_name(&self) -> &'static str {
        transport_name(self.rb.info().transport)
    }

    fn is_auto(&self) -> bool {
        self.rb.info().transport == Transport::Auto
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
        let rb = &*self.rb;
        loop {
            // The set the core tries first (`transport="auto"` has two: the core chooses).
            let first = rb.next_transport();
            // SAFETY: per this function's contract.
            let r = unsafe { rb.enqueue_raw_stream(stream as CUstream, None, sources, count) };
            let e = match r {
                Ok(ticket) => {
                    // The ticket's set, without a snapshot of the readback's settings.
                    let transport = ticket.transport();
                    return Ok(Ticket::pack(
                        self.pool(transport),
                        transport_name(transport),
                        self.next_seq.fetch_add(1, Ordering::Relaxed) + 1,
                        ticket,
                        keep,
                        self.shared.clone(),
                        self.specs.clone(),
                        self.columns,
                    ));
                }
                Err(e @ srb::Error::SlotsExhausted { .. }) => e,
                Err(e) => return Err(to_py(py, e)),
            };
            // Every slot held: wait for a dropped ticket of the set tried first, else of the
            // other (an auto readback's).
            let deferred = &self.shared.deferred;
            let other = match first {
                Transport::Staged => Transport::Mapped,
                Transport::Mapped | Transport::Auto => Transport::Staged,
            };
            let freed = deferred.free_oldest(py, self.pool(first))?
                || (self.is_auto() && deferred.free_oldest(py, self.pool(other))?);
            if !freed {
                return Err(to_py(py, e));
            }
            self.shared.bind(py)?;
        }
    }
}

#[pymethods]
impl Readback {
    /// Raises `ConfigError` (a `ValueError`) or `TypeError` for bad settings or dtypes,
    /// checked before the device is opened; `DriverNotFoundError` without a CUDA driver;
    /// `NoDeviceError` without the device; `UnsupportedDeviceError` below compute capability
    /// 7.0; `SizedCopyUnavailableError` for `staged_copy="sized"` where the driver lacks it;
    /// `CudaError` when an allocation or the kernel's loading fails.
    #[new]
    #[pyo3(signature = (capacity, dtype=None, columns=None, slots=IntSetting(2), device=IntSetting(0), transport="mapped", staged_copy="auto"))]
    #[pyo3(
        text_signature = "(capacity, dtype=None, columns=None, slots=2, device=0, transport='mapped', staged_copy='auto')"
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
        staged_copy: &str,
    ) -> PyResult<Self> {
        let is_auto = transport == "auto";
        let (capacity, slots, device, transport) = check_settings(
            capacity.0,
            slots.0,
            device.0,
            if is_auto { "mapped" } else { transport },
        )?;
        let staged_copy = check_staged_copy(staged_copy)?;
        let (specs, columns) = parse_columns(py, dtype, columns)?;
        // Under transport="auto" the core keeps a mapped and a staged set, and `staged_copy`
        // is the staged set's.
        let config = ReadbackConfig::new(capacity)
            .slots(slots)
            .transport(if is_auto { Transport::Auto } else { transport })
            .staged_copy(staged_copy);
        let (shared, schema, _restore) =
            open(py, device, &specs, |s| ColumnReadback::check(s, &config))?;
        let rb = ColumnReadback::new(&shared.ctx, &schema, config).py_err(py)?;
        Ok(Readback {
            rb: ManuallyDrop::new(rb),
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
        let _restore = CtxGuard::save_unless(&self.shared.ctx);
        self.shared.deferred.sweep();
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
        // frameworks (pointer, length and element size checked; the core checks again that
        // each column's first address and the count's are device memory of this context); the
        // enqueue stream waits for their producers (order_after, or the producer's own
        // __dlpack__(stream=)); `keep` holds them (and the stream object) until the readback
        // is known complete, or with keep=False the caller orders their reuse after the pack.
        unsafe { self.pack(py, inp.stream, &inp.sources, inp.count, held) }
    }

    /// The enqueue on pre-read addresses, for measuring the binding's own cost and for callers
    /// that hold raw handles: `ptrs[i]` the device address of column `i`'s first row,
    /// `rows[i]` its rows, `count_ptr` the count's device address (`count_kind` one of
    /// `"int32"`, `"int64"`, `"uint32"`, `"uint64"`), `stream` a `cudaStream_t` as an int (0:
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
        let kind = count_kind_named(count_kind)?;
        let sources: Vec<ColumnSource> = ptrs
            .iter()
            .zip(&rows)
            .map(|(&ptr, &len)| ColumnSource { ptr, len })
            .collect();
        let _restore = CtxGuard::save_unless(&self.shared.ctx);
        self.shared.deferred.sweep();
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
        let target = profile::Target {
            rb: &self.rb,
            pool: self.pool(self.rb.next_transport()),
            shared: &self.shared,
            specs: &self.specs,
            columns: self.columns,
        };
        profile::run(py, &target, data, count, reps, before)
    }

    /// Replaces the slots with ones of `capacity` rows (after a `CountExceedsCapacityError`:
    /// the device data is untouched, enqueue again). Tickets already handed out keep theirs.
    /// Raises `ConfigError` for a capacity below 1, `CudaError` when an allocation fails (the
    /// slots then stay as they were).
    fn grow(&self, py: Python<'_>, capacity: IntSetting) -> PyResult<()> {
        let _restore = CtxGuard::save();
        let capacity = check_capacity(capacity.0)?;
        self.rb.grow(capacity).py_err(py)?;
        self.generation.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Slots held now: by tickets, readouts and their views, and by tickets dropped while
    /// their readback was in flight, until the next enqueue sees it complete. For
    /// `transport="auto"`, of both sets together.
    #[getter]
    fn slots_in_use(&self) -> usize {
        self.rb.slots_in_use()
    }
    /// For `transport="auto"`: the count from which an enqueue goes to the staged slots (the
    /// last count read back decides); None for a fixed transport.
    #[getter]
    fn auto_staged_from(&self) -> Option<usize> {
        self.rb.info().auto_staged_from
    }
    /// The settings in effect and the slot layout, as a dict: see `INFO_FIELDS` (of the
    /// mapped slots for `transport="auto"`, with `auto_staged_slots`: the staged slots
    /// allocated, 0 while the threshold is out of reach).
    #[getter]
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let core = self.rb.info();
        info::dict(
            py,
            &Facts {
                auto: (core.transport == Transport::Auto).then(|| AutoFacts::of(&core)),
                core,
                device: self.shared.device,
            },
        )
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
            self.rb.info().capacity,
            describe_columns(py, &self.specs, self.columns),
            self.rb.info().slots,
            self.shared.device,
            self.transport_name()
        )
    }
}

impl Drop for Readback {
    fn drop(&mut self) {
        let _restore = CtxGuard::save();
        // SAFETY: taken once, here, and never used again.
        let rb = unsafe { ManuallyDrop::take(&mut self.rb) };
        crate::detached_drop::drop_detached(rb);
    }
}
