//! `SizedLaunch`: a GPU step sized by a device-resident count (the core's
//! `sized_readback::SizedLaunch`). The body callable records each size class's work on a
//! capturing stream at construction; each launch then runs the body of the count's class,
//! chosen on the device.
use crate::array::acquire;
use crate::driver::{bind, CtxGuard};
use crate::errors::{to_py, IntoPy};
use crate::inputs::count_kind;
use crate::keep::Keep;
use crate::settings::{
    check_capacity, check_classes, check_device, check_items_per_block, IntSetting,
};
use crate::stream::resolve;
use crate::wait_clock::WaitClock;
use pyo3::prelude::*;
use srb::RawCount;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};

/// One size class, as the body callable sees it while it records.
#[pyclass(module = "sized_readback", frozen)]
pub(crate) struct SizeClass {
    /// Which class, from 0 (the smallest).
    #[pyo3(get)]
    index: usize,
    /// The largest count this body runs for: size the grid or the library call for it.
    #[pyo3(get)]
    n_max: u64,
    /// The count's device address: the body's kernels read the true count there.
    #[pyo3(get)]
    count_ptr: u64,
    /// The count's dtype, by numpy name.
    #[pyo3(get)]
    count_dtype: String,
    /// The stream handle to enqueue the body's work on (capturing into the class's body):
    /// ``torch.cuda.ExternalStream(c.stream)``, ``cupy.cuda.ExternalStream(c.stream)``. The
    /// library's stream, destroyed when the build returns: not to be kept.
    #[pyo3(get)]
    stream: usize,
}

#[pymethods]
impl SizeClass {
    fn __repr__(&self) -> String {
        format!(
            "SizeClass(index={}, n_max={}, stream={:#x})",
            self.index, self.n_max, self.stream
        )
    }
}

/// What one launch ran: the count the device read and the class whose body ran.
#[pyclass(module = "sized_readback", frozen, eq)]
#[derive(PartialEq)]
pub(crate) struct LaunchOutcome {
    /// The count the device read.
    #[pyo3(get)]
    count: u64,
    /// The class whose body ran (an index into ``SizedLaunch.classes``).
    #[pyo3(get)]
    index: usize,
}

#[pymethods]
impl LaunchOutcome {
    fn __repr__(&self) -> String {
        format!("LaunchOutcome(count={}, index={})", self.count, self.index)
    }
}

fn outcome(o: srb::LaunchOutcome) -> LaunchOutcome {
    LaunchOutcome {
        count: o.count(),
        index: o.class(),
    }
}

/// A GPU step sized by a device-resident count, with no host round trip.
///
/// ``count`` is a one-element integer device array (int32, uint32, int64, uint64) that the
/// producer writes; ``capacity`` the largest count any body runs for. ``body(c)`` is called
/// once per size class (``c.n_max`` = 1024, 4096, ... up to ``capacity``, or the ``classes``
/// given) with ``c.stream`` capturing: what it enqueues there is that class's body (a kernel
/// with a grid for ``c.n_max`` items reading the true count at ``c.count_ptr``, a library call
/// of that size). ``enqueue()`` then runs the body of the count's class, chosen on the device.
/// Needs a CUDA 12.8 driver (``SizedLaunchUnavailableError`` otherwise); a body that raises,
/// or whose work cannot be captured, raises ``BodyRecordingError`` naming the class.
///
/// ``items_per_block=k`` (no ``classes``) builds the exact-grid form: one class, the capacity,
/// whose body must be one kernel launch of a 1-D grid; the device sets its grid to
/// ceil(count / k) blocks at each launch, or skips it for 0, with no SWITCH node
/// (``BodyRecordingError`` for a body of anything else). A graph it is recorded into must be
/// uploaded before its first replay, and cannot be instantiated twice or cloned.
///
/// Keep the arrays the bodies read and write alive as long as the sized launch is launched.
#[pyclass(module = "sized_readback", frozen)]
pub(crate) struct SizedLaunch {
    /// `None` only in its drop.
    launch: Option<srb::SizedLaunch>,
    /// Recorded into a captured graph: kept to the process's end when dropped (`retired.rs`).
    recorded: AtomicBool,
    /// The count array (and what its protocol needed kept).
    keep: Keep,
    /// Its owner's object, to resolve the default stream as the readbacks do.
    count: Py<PyAny>,
    device: i32,
}

#[pymethods]
impl SizedLaunch {
    #[new]
    #[pyo3(
        signature = (count, capacity, body, *, classes=None, items_per_block=None, device=IntSetting(0)),
        text_signature = "(count, capacity, body, *, classes=None, items_per_block=None, device=0)"
    )]
    fn new(
        py: Python<'_>,
        count: &Bound<'_, PyAny>,
        capacity: IntSetting,
        body: &Bound<'_, PyAny>,
        classes: Option<Vec<IntSetting>>,
        items_per_block: Option<IntSetting>,
        device: IntSetting,
    ) -> PyResult<Self> {
        let capacity = check_capacity(capacity.0)? as u64;
        let per_block = check_items_per_block(items_per_block.map(|n| n.0), classes.is_some())?;
        let classes = classes.as_deref().map(check_classes).transpose()?;
        let device = check_device(device.0)?;
        if !body.is_callable() {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "body must be a callable taking a SizeClass",
            ));
        }
        let mut keep = Keep::default();
        let a = acquire(py, count, 0, device, "the count", &mut keep)?;
        // One element of an integer type, or a ValueError naming what it is.
        let kind = count_kind(&a)?;
        let raw = RawCount::new(a.ptr, kind);
        let mut builder = srb::SizedLaunch::builder(raw, capacity);
        if let Some(c) = classes {
            builder = builder.classes(c);
        }
        if let Some(n) = per_block {
            builder = builder.exact_grid(n);
        }
        builder.plan().py_err(py)?;
        srb::device::count().py_err(py)?;
        let _restore = CtxGuard::save();
        let ctx = srb::device::open(device as usize).py_err(py)?;
        bind(py, &ctx)?;
        let raised: RefCell<Option<PyErr>> = RefCell::new(None);
        let built = builder.build(&ctx, |c| {
            let class = SizeClass {
                index: c.index(),
                n_max: c.n_max(),
                count_ptr: c.count().ptr(),
                count_dtype: crate::inputs::numpy_name(c.count().kind()),
                stream: c.stream().cu_stream() as usize,
            };
            match body.call1((class,)) {
                Ok(_) => Ok(()),
                Err(e) => {
                    let text = e.to_string();
                    *raised.borrow_mut() = Some(e);
                    Err(text)
                }
            }
        });
        let launch = built.map_err(|e| {
            let err = to_py(py, e);
            if let Some(cause) = raised.into_inner() {
                err.set_cause(py, Some(cause));
            }
            err
        })?;
        Ok(SizedLaunch {
            launch: Some(launch),
            recorded: AtomicBool::new(false),
            keep,
            count: count.clone().unbind(),
            device,
        })
    }

    /// The classes' ``n_max``, ascending; the last one is the capacity.
    #[getter]
    fn classes(&self) -> Vec<u64> {
        self.launch().classes().to_vec()
    }

    /// The largest count a body runs for.
    #[getter]
    fn capacity(&self) -> u64 {
        self.launch().capacity()
    }

    /// Launches it on ``stream`` (default: the current stream of the framework that owns the
    /// count) after the work already there: the device reads the count and runs its class's
    /// body. Returns a ``SizedTicket`` at once. On a capturing stream (``torch.cuda.graph``)
    /// the sized launch is recorded into the graph instead and None is returned: each replay
    /// runs its own count's class, ``recorded_outcome()`` tells the newest replay's after it
    /// completed, and the sized launch, once recorded, is kept to the process's end if
    /// dropped (the graph may still be replayed).
    #[pyo3(signature = (stream=None))]
    fn enqueue(
        &self,
        py: Python<'_>,
        stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<SizedTicket>> {
        let count = self.count.bind(py);
        let s = resolve(py, stream, Some(count), self.device, None)?;
        let handle = s.handle as srb::cudarc::driver::sys::CUstream;
        let _restore = CtxGuard::save();
        // SAFETY: the stream handle is the caller's or its framework's current stream.
        match unsafe { self.launch().enqueue_raw(handle) } {
            Ok(t) => Ok(Some(SizedTicket { ticket: t })),
            Err(srb::Error::StreamCapturing) => {
                // SAFETY: a capturing stream; once recorded, this sized launch and what it
                // keeps are retired, not freed, when dropped (Drop below), so every replay
                // finds them. A recording that fails invalidates the capture: no replay.
                unsafe { self.launch().record(handle) }.py_err(py)?;
                self.recorded.store(true, Ordering::Relaxed);
                Ok(None)
            }
            Err(e) => Err(to_py(py, e)),
        }
    }

    /// After a replay of a graph it was recorded into has completed: the newest replay's
    /// ``LaunchOutcome``, or None before any. Raises the count's error (a count past the
    /// capacity, a negative one) if that replay ran no body.
    fn recorded_outcome(&self, py: Python<'_>) -> PyResult<Option<LaunchOutcome>> {
        Ok(self.launch().recorded_outcome().py_err(py)?.map(outcome))
    }

    fn __repr__(&self) -> String {
        let _ = &self.keep;
        format!(
            "SizedLaunch(capacity={}, classes={:?})",
            self.launch().capacity(),
            self.launch().classes()
        )
    }
}

impl SizedLaunch {
    fn launch(&self) -> &srb::SizedLaunch {
        self.launch
            .as_ref()
            .expect("a sized launch holds its core until dropped")
    }
}

impl Drop for SizedLaunch {
    fn drop(&mut self) {
        let Some(launch) = self.launch.take() else {
            return;
        };
        if self.recorded.load(Ordering::Relaxed) {
            let keep = std::mem::take(&mut self.keep).into_vec();
            crate::retired::retire_launch(launch, keep);
        } else {
            let _restore = CtxGuard::save();
            crate::detached_drop::drop_detached(launch);
        }
    }
}

/// One enqueued sized launch: ``wait()`` tells what ran.
#[pyclass(module = "sized_readback", frozen)]
pub(crate) struct SizedTicket {
    ticket: srb::SizedTicket,
}

#[pymethods]
impl SizedTicket {
    /// Blocks (without the GIL) until the launch has run, its body included: its
    /// ``LaunchOutcome``; raises the
    /// count's error if no body ran (``CountExceedsCapacityError`` with the true count,
    /// ``NegativeCountError``), ``ReadbackTimeoutError`` after ``timeout`` seconds.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<LaunchOutcome> {
        let clock = WaitClock::start(timeout)?;
        let _restore = CtxGuard::save();
        loop {
            let slice = clock.slice();
            let r = py.detach(|| self.ticket.wait_timeout(slice));
            match r {
                Err(srb::Error::Timeout { .. }) => clock.slice_ran_out(py)?,
                other => return other.map(outcome).py_err(py),
            }
        }
    }

    /// The launch's number (1, 2, ...).
    #[getter]
    fn seq(&self) -> u64 {
        self.ticket.seq()
    }
}
