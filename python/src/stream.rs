//! Streams: the handle of a framework's stream object, the stream an enqueue runs on when none
//! is given, and the per-readback state that orders an enqueue after other streams and keeps
//! the arrays of dropped, unfinished tickets alive until their readback completes.
use crate::array::{cai_stream, same_stream};
use crate::errors::to_py;
use crate::py_util::{cupy_current_stream, owner_of, torch_current_stream, Owner};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt};
use srb::cudarc::driver::sys::{self, CUevent, CUresult, CUstream};
use srb::cudarc::driver::CudaContext;
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
    if obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyBool>() {
        return as_handle(obj);
    }
    if let Ok(p) = obj.getattr(intern!(py, "__cuda_stream__")) {
        let v = if p.is_callable() { p.call0()? } else { p };
        let (_version, handle): (i64, Bound<'_, PyAny>) = v.extract().map_err(|_| {
            PyTypeError::new_err("__cuda_stream__ must return a (version, handle) tuple")
        })?;
        return as_handle(&handle);
    }
    for attr in [
        intern!(py, "cuda_stream"),
        intern!(py, "ptr"),
        intern!(py, "handle"),
    ] {
        if let Ok(v) = obj.getattr(attr) {
            return as_handle(&v);
        }
    }
    Err(PyTypeError::new_err(format!(
        "stream must be a torch.cuda.Stream, a CuPy stream, an object with __cuda_stream__, \
         an int handle or None, not {}",
        obj.get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default()
    )))
}

/// The stream an enqueue runs on, and the object to keep alive with it.
pub(crate) struct Resolved {
    pub(crate) handle: usize,
    pub(crate) keep: Option<Py<PyAny>>,
    /// The handle is PyTorch's current stream (so tensors read directly need no other wait).
    pub(crate) torch_current: bool,
}

/// `stream` as given, or (None) the current stream of the framework that owns `first`:
/// PyTorch's or CuPy's current stream; for CUDA Array Interface objects the stream they name;
/// otherwise the legacy default stream.
pub(crate) fn resolve(
    py: Python<'_>,
    stream: Option<&Bound<'_, PyAny>>,
    first: Option<&Bound<'_, PyAny>>,
    device: i32,
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
        Owner::Other => {
            let handle = if first.hasattr(intern!(py, "__dlpack_device__"))? {
                0
            } else {
                cai_stream(py, first).unwrap_or(0)
            };
            Resolved {
                handle,
                keep: None,
                torch_current: false,
            }
        }
    })
}

/// Restores the thread's current CUDA context when dropped. The library's calls bind the
/// readback's context and leave it bound; PyTorch and CuPy take their current device from the
/// current context, so every call from Python that reaches the driver puts back the one it found
/// (one `cuCtxGetCurrent` on entry, one on exit). Make one only once the driver is loaded (a
/// readback exists): cudarc panics on a first driver call without it.
pub(crate) struct CtxGuard(sys::CUcontext);

impl CtxGuard {
    pub(crate) fn save() -> Self {
        let mut c: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; the driver is loaded (the caller's contract).
        if unsafe { sys::cuCtxGetCurrent(&mut c) } != CUresult::CUDA_SUCCESS {
            c = std::ptr::null_mut();
        }
        CtxGuard(c)
    }
}

impl Drop for CtxGuard {
    fn drop(&mut self) {
        let mut now: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: valid out-pointer; `self.0` was current on this thread (a context this
        // thread may bind again) or null (unbinds).
        unsafe {
            if sys::cuCtxGetCurrent(&mut now) == CUresult::CUDA_SUCCESS && now != self.0 {
                let _ = sys::cuCtxSetCurrent(self.0);
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
    /// Events free for the next enqueue's completion.
    free: Vec<CUevent>,
    /// Dropped, unfinished tickets: their completion event and what they read.
    deferred: Vec<(CUevent, Vec<Py<PyAny>>)>,
}

/// What every ticket of a readback shares with it: the context, the ordering event, and the
/// arrays of dropped tickets whose readback may still run.
pub(crate) struct Shared {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) device: i32,
    events: Mutex<Events>,
}

// SAFETY: the CUevent handles are used only under the mutex, with the context bound; the Py
// handles are Send + Sync.
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
                free: Vec::new(),
                deferred: Vec::new(),
            }),
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

    /// Records an event on `stream` that completes once the work enqueued on it so far (the
    /// readback just enqueued) has. The context must be bound.
    ///
    /// # Safety
    /// `stream` is a live stream of this context.
    pub(crate) unsafe fn record(&self, py: Python<'_>, stream: usize) -> PyResult<CUevent> {
        let popped = self.lock().free.pop();
        let e = match popped {
            Some(e) => e,
            None => Self::create(py)?,
        };
        // SAFETY: per the contract.
        let status = unsafe { sys::cuEventRecord(e, stream as CUstream) };
        if let Err(err) = check(py, status, "cuEventRecord") {
            self.lock().free.push(e);
            return Err(err);
        }
        Ok(e)
    }

    /// `event` (from [`Shared::record`]) is no longer needed.
    pub(crate) fn give_back(&self, event: CUevent) {
        self.lock().free.push(event);
    }

    /// Keeps `keep` alive until `event` completes.
    pub(crate) fn defer(&self, event: CUevent, keep: Vec<Py<PyAny>>) {
        self.lock().deferred.push((event, keep));
    }

    /// Lets go of what deferred readbacks that have completed were reading.
    pub(crate) fn sweep(&self) {
        let mut released = Vec::new();
        {
            let mut ev = self.lock();
            if ev.deferred.is_empty() {
                return;
            }
            let mut i = 0;
            while i < ev.deferred.len() {
                let e = ev.deferred[i].0;
                // SAFETY: a live event of this context.
                match unsafe { sys::cuEventQuery(e) } {
                    CUresult::CUDA_ERROR_NOT_READY => i += 1,
                    status => {
                        let (e, keep) = ev.deferred.swap_remove(i);
                        if status == CUresult::CUDA_SUCCESS {
                            ev.free.push(e);
                        }
                        released.push(keep);
                    }
                }
            }
        }
        // Dropped outside the lock: a destructor may run Python code that enqueues.
        drop(released);
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let _restore = CtxGuard::save();
        let ctx = self.ctx.cu_ctx();
        let ev = self.events.get_mut().unwrap_or_else(|p| p.into_inner());
        // SAFETY: the context is alive (self.ctx holds it).
        if unsafe { sys::cuCtxSetCurrent(ctx) } != CUresult::CUDA_SUCCESS {
            return;
        }
        for (e, _) in &ev.deferred {
            // SAFETY: live events of this context; waiting here is the price of dropping a
            // readback whose dropped tickets are still being read.
            unsafe {
                let _ = sys::cuEventSynchronize(*e);
                let _ = sys::cuEventDestroy_v2(*e);
            }
        }
        for e in ev.free.iter().chain(ev.order.iter()) {
            // SAFETY: live events of this context, no longer used.
            unsafe {
                let _ = sys::cuEventDestroy_v2(*e);
            }
        }
    }
}
