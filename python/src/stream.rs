//! Streams: the handle of a framework's stream object, the stream an enqueue runs on when none
//! is given, and the per-readback state that orders an enqueue after other streams and keeps
//! the arrays of dropped, unfinished tickets alive until their readback completes.
use crate::array::same_stream;
use crate::errors::to_py;
use crate::py_util::{
    cupy_current_stream, owner_of, stale_accessor, torch_current_stream, type_facts, Owner,
    StreamAccess, STREAM_ATTRS,
};
use crate::readback::{Core, Keep};
use crate::wait_clock::WAIT_SLICE;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt};
use srb::cudarc::driver::sys::{self, CUevent, CUresult, CUstream};
use srb::cudarc::driver::CudaContext;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The raw `CUstream` (`cudaStream_t`) of a stream argument: an int handle (0 the legacy
/// default stream, 1 `cudaStreamLegacy`, 2 `cudaStreamPerThread`), an object with
/// `__cuda_stream__` (returning `(version, handle)`), a `torch.cuda.Stream` (`.cuda_stream`), a
/// CuPy stream (`.ptr`) or a Numba stream (`.handle`).
pub(crate) fn handle_of(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<usize> {
    let as_handle = |v: &Bound<'_, PyAny>| -> PyResult<usize> {
        if v.is_none() {
            return Ok(0);
        }
        if v.is_instance_of::<PyBool>() {
            return Err(PyTypeError::new_err(
                "a stream handle is an int, not a bool",
            ));
        }
        let h: i128 = if v.is_instance_of::<PyInt>() {
            v.extract()?
        } else if let Ok(value) = v.getattr(intern!(py, "value")) {
            // ctypes.c_void_p (Numba's handle without the NVIDIA bindings): None is null.
            if value.is_none() {
                0
            } else {
                value.extract()?
            }
        } else {
            v.call_method0(intern!(py, "__int__"))?.extract()?
        };
        usize::try_from(h).map_err(|_| PyValueError::new_err(format!("{h} is not a stream handle")))
    };
    // Which accessor a stream type has is cached per type; the handle itself is read on
    // every call (an object may be re-pointed, and a freed stream's handle reused).
    // An accessor that raises AttributeError (the class changed since it was cached, or its
    // property raises it): the type is forgotten and the object probed once more.
    let mut stale = None;
    match type_facts(obj).stream {
        StreamAccess::Int => return as_handle(obj),
        StreamAccess::Protocol => match obj.getattr(intern!(py, "__cuda_stream__")) {
            Ok(p) => return protocol(&p, &as_handle),
            Err(e) => stale = Some(stale_accessor(obj, e)?),
        },
        StreamAccess::Attr(i) => {
            match obj.getattr(pyo3::types::PyString::intern(py, STREAM_ATTRS[i])) {
                Ok(v) => return as_handle(&v),
                Err(e) => stale = Some(stale_accessor(obj, e)?),
            }
        }
        StreamAccess::Probe => {}
    }
    if obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyBool>() {
        return as_handle(obj);
    }
    if obj.hasattr(intern!(py, "__cuda_stream__"))? {
        return protocol(&obj.getattr(intern!(py, "__cuda_stream__"))?, &as_handle);
    }
    for attr in STREAM_ATTRS {
        if let Ok(v) = obj.getattr(pyo3::types::PyString::intern(py, attr)) {
            return as_handle(&v);
        }
    }
    let err = PyTypeError::new_err(format!(
        "stream must be a torch.cuda.Stream, a CuPy stream, an object with __cuda_stream__, \
         an int handle or None, not {}",
        obj.get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default()
    ));
    err.set_cause(py, stale);
    Err(err)
}

/// `__cuda_stream__` (its value `p`): a `(version, handle)` tuple, or a method returning one.
fn protocol(
    p: &Bound<'_, PyAny>,
    as_handle: &dyn Fn(&Bound<'_, PyAny>) -> PyResult<usize>,
) -> PyResult<usize> {
    let v = if p.is_callable() {
        p.call0()?
    } else {
        p.clone()
    };
    let (_version, handle): (i64, Bound<'_, PyAny>) = v.extract().map_err(|_| {
        PyTypeError::new_err("__cuda_stream__ must return a (version, handle) tuple")
    })?;
    as_handle(&handle)
}

/// The stream an enqueue runs on, and the object to keep alive with it.
pub(crate) struct Resolved {
    pub(crate) handle: usize,
    pub(crate) keep: Option<Py<PyAny>>,
    /// The handle is PyTorch's current stream (so tensors read directly need no other wait).
    pub(crate) torch_current: bool,
}

/// `stream` as given, or (None) the current stream of the framework that owns `first`:
/// PyTorch's or CuPy's current stream; for CUDA Array Interface objects the stream they name
/// (`cai_stream`, read by the caller from the interface it parses anyway); otherwise the
/// legacy default stream.
pub(crate) fn resolve(
    py: Python<'_>,
    stream: Option<&Bound<'_, PyAny>>,
    first: Option<&Bound<'_, PyAny>>,
    device: i32,
    cai_stream: Option<usize>,
) -> PyResult<Resolved> {
    if let Some(s) = stream.filter(|s| !s.is_none()) {
        return Ok(Resolved {
            handle: handle_of(py, s)?,
            keep: Some(s.clone().unbind()),
            torch_current: false,
        });
    }
    let Some(first) = first else {
        return Ok(Resolved {
            handle: 0,
            keep: None,
            torch_current: false,
        });
    };
    Ok(match owner_of(first) {
        Owner::Torch => Resolved {
            handle: torch_current_stream(py, device)?,
            keep: None,
            torch_current: true,
        },
        Owner::Cupy => {
            let (handle, obj) = cupy_current_stream(py)?;
            Resolved {
                handle,
                keep: Some(obj),
                torch_current: false,
            }
        }
        Owner::Other => Resolved {
            handle: cai_stream.unwrap_or(0),
            keep: None,
            torch_current: false,
        },
    })
}

/// The slot set a ticket took: one per transport and per generation (each `grow` makes new
/// slots; tickets handed out before keep the old ones). A dropped ticket frees a slot only of
/// its own set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Pool {
    pub(crate) staged: bool,
    pub(crate) generation: u64,
}

/// Restores the thread's current CUDA context when dropped. The library's calls bind the
/// readback's context and leave it bound; PyTorch and CuPy take their current device from the
/// current context, so every call from Python that reaches the driver puts back the one it found
/// (one `cuCtxGetCurrent` on entry, one on exit). Make one only once the driver is loaded (a
/// readback exists): cudarc panics on a first driver call without it.
pub(crate) struct CtxGuard(Option<sys::CUcontext>);

impl CtxGuard {
    pub(crate) fn save() -> Self {
        CtxGuard(Some(current()))
    }

    /// [`CtxGuard::save`] for a call that binds `ours` at most: when `ours` is already current
    /// (PyTorch and the readback on one device share its primary context), nothing will need
    /// restoring, and the drop makes no driver call.
    pub(crate) fn save_unless(ours: sys::CUcontext) -> Self {
        let c = current();
        CtxGuard((c != ours).then_some(c))
    }
}

fn current() -> sys::CUcontext {
    let mut c: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: a valid out-pointer; the driver is loaded (the caller's contract).
    if unsafe { sys::cuCtxGetCurrent(&mut c) } != CUresult::CUDA_SUCCESS {
        c = std::ptr::null_mut();
    }
    c
}

impl Drop for CtxGuard {
    fn drop(&mut self) {
        let Some(saved) = self.0 else { return };
        let mut now: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: valid out-pointer; `saved` was current on this thread (a context this
        // thread may bind again) or null (unbinds).
        unsafe {
            if sys::cuCtxGetCurrent(&mut now) == CUresult::CUDA_SUCCESS && now != saved {
                let _ = sys::cuCtxSetCurrent(saved);
            }
        }
    }
}

fn check(py: Python<'_>, status: CUresult, call: &'static str) -> PyResult<()> {
    status
        .result()
        .map_err(|source| to_py(py, srb::Error::Cuda { call, source }))
}

struct Events {
    /// Joins other streams into an enqueue's stream (record there, wait here).
    order: Option<CUevent>,
    /// Dropped, unfinished tickets: their slot set ([`Pool`]), their slot (still held) and
    /// what they read, oldest first.
    deferred: Vec<(Pool, Core, Keep)>,
}

/// What every ticket of a readback shares with it: the context, the ordering event, and the
/// dropped tickets whose readback may still run.
///
/// A dropped ticket whose readback is still in flight keeps its slot and its arrays here until
/// the readback is seen complete (polled by the next enqueue: see [`Shared::sweep`] for what
/// the poll costs), so no enqueue records an event of its own for that case.
pub(crate) struct Shared {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) device: i32,
    events: Mutex<Events>,
    /// Whether `deferred` may be non-empty (read without the lock on every enqueue).
    any_deferred: AtomicBool,
    /// The count of the readback completed last (`transport="auto"` chooses by it).
    pub(crate) last_rows: AtomicUsize,
}

// SAFETY: the CUevent handle is used only under the mutex, with the context bound; the core
// tickets and Py handles are Send + Sync.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

impl Shared {
    pub(crate) fn new(ctx: Arc<CudaContext>, device: i32) -> Arc<Self> {
        Arc::new(Shared {
            ctx,
            device,
            events: Mutex::new(Events {
                order: None,
                deferred: Vec::new(),
            }),
            any_deferred: AtomicBool::new(false),
            last_rows: AtomicUsize::new(0),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Events> {
        self.events.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes the readback's context current on this thread (`cuCtxGetCurrent`, then
    /// `cuCtxSetCurrent` only if another is current), as the core's calls do; unlike cudarc's
    /// `bind_to_thread` it leaves alone an error cudarc may have stashed.
    pub(crate) fn bind(&self, py: Python<'_>) -> PyResult<()> {
        let mut current: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        let status = unsafe { sys::cuCtxGetCurrent(&mut current) };
        check(py, status, "cuCtxGetCurrent")?;
        if current != self.ctx.cu_ctx() {
            // SAFETY: the context is alive (self.ctx holds it).
            let status = unsafe { sys::cuCtxSetCurrent(self.ctx.cu_ctx()) };
            check(py, status, "cuCtxSetCurrent")?;
        }
        Ok(())
    }

    fn create(py: Python<'_>) -> PyResult<CUevent> {
        let mut ev: CUevent = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; the caller bound the context.
        let status = unsafe {
            sys::cuEventCreate(&mut ev, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32)
        };
        check(py, status, "cuEventCreate")?;
        Ok(ev)
    }

    /// Makes work enqueued next on `stream` wait for the work already on each of `producers`
    /// (those that are not `stream` itself). The context must be bound.
    ///
    /// # Safety
    /// Every handle is a live stream of this context (or a legacy/per-thread handle).
    pub(crate) unsafe fn order_after(
        &self,
        py: Python<'_>,
        producers: &[usize],
        stream: usize,
    ) -> PyResult<()> {
        let mut done: Vec<usize> = Vec::new();
        for &p in producers {
            if same_stream(p, stream) || done.iter().any(|&d| same_stream(d, p)) {
                continue;
            }
            done.push(p);
            let mut ev = self.lock();
            let e = match ev.order {
                Some(e) => e,
                None => *ev.order.insert(Self::create(py)?),
            };
            // SAFETY: e is a live event of this context; the streams per the contract. A wait
            // takes the event's state at the time of the call, so the one event serves every
            // producer in turn.
            unsafe {
                check(py, sys::cuEventRecord(e, p as CUstream), "cuEventRecord")?;
                check(
                    py,
                    sys::cuStreamWaitEvent(stream as CUstream, e, 0),
                    "cuStreamWaitEvent",
                )?;
            }
        }
        Ok(())
    }

    /// Keeps the slot of a dropped ticket whose readback is in flight, and what it reads,
    /// until the readback completes.
    pub(crate) fn defer(&self, pool: Pool, core: Core, keep: Keep) {
        self.lock().deferred.push((pool, core, keep));
        self.any_deferred.store(true, Ordering::Release);
    }

    /// Lets go of the dropped tickets whose readback has completed (their slots and arrays).
    /// Free while none is deferred (one atomic load). Otherwise each deferred ticket is polled:
    /// a mapped slot whose trailer is visible in host memory costs no driver call; one whose
    /// trailer is not there yet (still in flight), and every staged slot (its trailer arrives
    /// by the copy, so completion is the event's), costs a `cuEventQuery` (and a
    /// `cuCtxGetCurrent`).
    pub(crate) fn sweep(&self) {
        if !self.any_deferred.load(Ordering::Acquire) {
            return;
        }
        let mut released = Vec::new();
        {
            let mut ev = self.lock();
            let mut i = 0;
            while i < ev.deferred.len() {
                if matches!(ev.deferred[i].1.try_wait(), Ok(None)) {
                    i += 1;
                } else {
                    released.push(ev.deferred.remove(i));
                }
            }
            if ev.deferred.is_empty() {
                self.any_deferred.store(false, Ordering::Release);
            }
        }
        // Dropped outside the lock: a destructor may run Python code that enqueues.
        drop(released);
    }

    /// After an enqueue into `pool` found every slot held: waits for the oldest dropped ticket
    /// of that slot set (the only ones whose completion frees a slot the enqueue can take)
    /// and frees its slot. The wait releases the GIL in slices of [`WAIT_SLICE`] and checks
    /// for signals between them (Ctrl-C raises `KeyboardInterrupt`, and the ticket stays
    /// deferred). `Ok(false)` when no dropped ticket of `pool` holds a slot (the slots are
    /// held by live tickets or readouts: nothing to wait for).
    pub(crate) fn free_oldest(&self, py: Python<'_>, pool: Pool) -> PyResult<bool> {
        let (core, keep) = {
            let mut ev = self.lock();
            let Some(i) = ev.deferred.iter().position(|(p, ..)| *p == pool) else {
                return Ok(false);
            };
            let (_, core, keep) = ev.deferred.remove(i);
            if ev.deferred.is_empty() {
                self.any_deferred.store(false, Ordering::Release);
            }
            (core, keep)
        };
        loop {
            let r = py.detach(|| match core.wait_timeout(WAIT_SLICE) {
                Err(srb::Error::Timeout { .. }) => false,
                // Complete, or failed: its errors are its own (the ticket was dropped, no one
                // reads them).
                _ => true,
            });
            if r {
                break;
            }
            if let Err(e) = py.check_signals() {
                // Still in flight: back to the front, slot and arrays held.
                self.lock().deferred.insert(0, (pool, core, keep));
                self.any_deferred.store(true, Ordering::Release);
                return Err(e);
            }
        }
        drop(core);
        drop(keep);
        Ok(true)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let _restore = CtxGuard::save();
        let ev = self.events.get_mut().unwrap_or_else(|p| p.into_inner());
        // Waiting here is the price of dropping a readback whose dropped tickets are still
        // being read: their arrays must outlive the read.
        for (_, core, keep) in ev.deferred.drain(..) {
            let _ = core.wait_timeout(std::time::Duration::MAX);
            drop(core);
            drop(keep);
        }
        let ctx = self.ctx.cu_ctx();
        // SAFETY: the context is alive (self.ctx holds it).
        if unsafe { sys::cuCtxSetCurrent(ctx) } != CUresult::CUDA_SUCCESS {
            return;
        }
        if let Some(e) = ev.order.take() {
            // SAFETY: a live event of this context, no longer used.
            unsafe {
                let _ = sys::cuEventDestroy_v2(e);
            }
        }
    }
}
