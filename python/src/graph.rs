//! `GraphReadback`: a readback recorded into a CUDA graph (e.g. inside
//! `torch.cuda.graph(...)`) and consumed once per replay with `next()`.
use crate::append::desc_array;
use crate::driver::CtxGuard;
use crate::errors::{make, to_py, IntoPy};
use crate::info::{self, Facts};
use crate::inputs::inputs;
use crate::readout::{column_bytes, HeldSlot, Holder, Readout};
use crate::retired::retire;
use crate::settings::{check_settings, IntSetting};
use crate::shared::{open, Shared};
use crate::spec::{describe_columns, parse_columns, ColSpec};
use crate::wait_clock::WaitClock;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use srb::cudarc::driver::sys::CUstream;
use srb::{OwnedReplay, ReadbackConfig, Taken, Transport};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// A device-sequenced readback for CUDA graphs: `record()` it while a stream is captured,
/// replay the graph, and take one readout per replay with `next()`, in order.
#[pyclass(module = "sized_readback._native")]
pub struct GraphReadback {
    inner: Mutex<Option<Arc<srb::GraphReadback>>>,
    shared: Arc<Shared>,
    specs: Arc<Vec<ColSpec>>,
    columns: bool,
    /// Everything a recording reads: every replay reads it again.
    keep: Mutex<Vec<Py<PyAny>>>,
    recorded: AtomicBool,
}

impl GraphReadback {
    fn lock(&self) -> MutexGuard<'_, Option<Arc<srb::GraphReadback>>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn graph(&self, py: Python<'_>) -> PyResult<Arc<srb::GraphReadback>> {
        self.lock().clone().ok_or_else(|| {
            make(
                py,
                "ReadbackError",
                "the graph readback was closed".to_string(),
                &[],
            )
        })
    }

    /// The readout of a replay just taken.
    fn readout(&self, py: Python<'_>, replay: OwnedReplay) -> PyResult<Py<Readout>> {
        let r = replay.readout();
        let (count, seq, cols) = (r.count(), r.seq(), column_bytes(&r, self.specs.len()));
        drop(r);
        Py::new(
            py,
            Readout::new(
                HeldSlot::new(Holder::Replay(replay)),
                count,
                seq,
                cols,
                self.specs.clone(),
                self.columns,
            ),
        )
    }

    /// Takes the next replay, waiting at most `timeout` (without the GIL): `Ok(None)` when
    /// it ran out (or another thread was taking one all that time), consuming nothing.
    fn take(
        &self,
        py: Python<'_>,
        g: &Arc<srb::GraphReadback>,
        timeout: Duration,
    ) -> PyResult<Option<OwnedReplay>> {
        let gg = g.clone();
        match py.detach(move || gg.take(Some(timeout))) {
            Ok(None) => Ok(None),
            Ok(Some(Taken {
                result: Err(srb::Error::Timeout { .. }),
                ..
            })) => Ok(None),
            Ok(Some(Taken { result: Err(e), .. })) => Err(to_py(py, e)),
            Ok(Some(Taken {
                replay: Some(replay),
                ..
            })) => Ok(Some(replay)),
            Ok(Some(Taken { seq, .. })) => Err(make(
                py,
                "ReadbackError",
                format!("replay {seq} was taken without its slot"),
                &[],
            )),
            Err(e) => Err(to_py(py, e)),
        }
    }
}

#[pymethods]
impl GraphReadback {
    #[new]
    #[pyo3(signature = (capacity, dtype=None, columns=None, slots=IntSetting(8), device=IntSetting(0)))]
    #[pyo3(text_signature = "(capacity, dtype=None, columns=None, slots=8, device=0)")]
    fn new(
        py: Python<'_>,
        capacity: IntSetting,
        dtype: Option<&Bound<'_, PyAny>>,
        columns: Option<&Bound<'_, PyAny>>,
        slots: IntSetting,
        device: IntSetting,
    ) -> PyResult<Self> {
        let (capacity, slots, device, _) = check_settings(capacity.0, slots.0, device.0, "mapped")?;
        let (specs, columns) = parse_columns(py, dtype, columns)?;
        let config = ReadbackConfig::new(capacity)
            .slots(slots)
            .transport(Transport::Mapped);
        let (shared, schema, _restore) = open(py, device, &specs, |s| {
            srb::GraphReadback::check(s, &config)
        })?;
        let g = srb::GraphReadback::new(&shared.ctx, &schema, config).py_err(py)?;
        Ok(GraphReadback {
            inner: Mutex::new(Some(Arc::new(g))),
            shared,
            specs: Arc::new(specs),
            columns,
            keep: Mutex::new(Vec::new()),
            recorded: AtomicBool::new(false),
        })
    }

    /// Records the pack of `count` rows of `data` on `stream` (default: the current stream of
    /// `data`'s framework, which inside `torch.cuda.graph(...)` is the capture stream). Every
    /// replay of the captured graph runs it again on the same arrays, which this object keeps
    /// alive. Outside a capture the pack runs once, and is taken with `next()` like a replay.
    ///
    /// `keep=False` keeps nothing alive: for memory whose life the graph itself governs, such
    /// as the private pool of `torch.compile(mode="reduce-overhead")`'s CUDA graphs, whose
    /// accounting a reference held here would upset. The caller then guarantees that the
    /// memory stays allocated for as long as the graph may be replayed.
    #[pyo3(signature = (data, count, stream=None, keep=true))]
    fn record(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        count: &Bound<'_, PyAny>,
        stream: Option<&Bound<'_, PyAny>>,
        keep: bool,
    ) -> PyResult<()> {
        let g = self.graph(py)?;
        let _restore = CtxGuard::save();
        let inp = inputs(
            py,
            &self.shared,
            &self.specs,
            self.columns,
            data,
            count,
            stream,
        )?;
        // SAFETY: the arrays are device memory read from their frameworks, kept alive (with
        // the stream object) for as long as this object lives, and never freed at all once
        // recorded unless close() is called (see Drop), or with keep=False alive for as long
        // as the graph, by the caller's documented promise; the recordings of one
        // GraphReadback run one at a time when its graphs are launched on one stream, as
        // documented.
        unsafe { g.record_raw_stream(inp.stream as CUstream, None, &inp.sources, inp.count) }
            .py_err(py)?;
        self.recorded.store(true, Ordering::Relaxed);
        if keep {
            self.keep
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(inp.keep.into_vec());
        }
        Ok(())
    }

    /// Blocks (without the GIL) until the next replay's readback is there and returns it.
    /// Raises `OverrunError` for a replay the device dropped (the host held every slot), the
    /// count's errors for that replay, `ReadbackTimeoutError` after `timeout` seconds.
    #[pyo3(signature = (timeout=None))]
    fn next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<Readout>> {
        let g = self.graph(py)?;
        let clock = WaitClock::start(timeout)?;
        let _restore = CtxGuard::save();
        loop {
            match self.take(py, &g, clock.slice())? {
                Some(replay) => return self.readout(py, replay),
                None => clock.slice_ran_out(py)?,
            }
        }
    }

    /// The next replay's readout if it is there, else None. Never blocks.
    fn try_next(&self, py: Python<'_>) -> PyResult<Option<Py<Readout>>> {
        let g = self.graph(py)?;
        let _restore = CtxGuard::save();
        match self.take(py, &g, Duration::ZERO)? {
            Some(replay) => self.readout(py, replay).map(Some),
            None => Ok(None),
        }
    }

    /// The descriptor for append kernels recorded into graphs with this readback (a numpy
    /// `APPEND_DESC_DTYPE` array of one element, passed by value): the same for every replay.
    fn append_desc(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let g = self.graph(py)?;
        let d = g.append_desc().py_err(py)?;
        self.recorded.store(true, Ordering::Relaxed);
        desc_array(py, d.as_bytes())
    }

    /// Frees the readback once nothing holds it. Call it only when no graph that recorded it
    /// will be launched again: a replay after close() would write into freed memory. Without
    /// close(), a graph readback that recorded anything is freed only at interpreter exit (its
    /// graphs may outlive it; `release_retired`); one that recorded nothing is freed when
    /// garbage-collected.
    fn close(&self) {
        let _restore = CtxGuard::save();
        let g = self.lock().take();
        drop(g);
        self.keep.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Whether close() was called.
    #[getter]
    fn closed(&self) -> bool {
        self.lock().is_none()
    }
    /// The sequence number `next()` returns next (from 1).
    #[getter]
    fn next_seq(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.graph(py)?.next_seq())
    }
    /// The newest sequence number the device dropped for lack of a released slot (0: none).
    #[getter]
    fn last_overrun(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.graph(py)?.last_overrun())
    }
    /// The settings in effect and the slot layout, as a dict (as `Readback.info`; `slots`:
    /// how many replays may run ahead of the host). Raises `ReadbackError` once closed.
    #[getter]
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let facts = Facts {
            core: self.graph(py)?.info(),
            device: self.shared.device,
            auto: None,
        };
        info::dict(py, &facts)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        match self.lock().as_ref() {
            Some(g) => format!(
                "GraphReadback(capacity={}, {}, slots={}, device={}, next_seq={})",
                g.info().capacity,
                describe_columns(py, &self.specs, self.columns),
                g.info().slots,
                self.shared.device,
                g.next_seq()
            ),
            None => "GraphReadback(closed)".to_string(),
        }
    }
}

impl Drop for GraphReadback {
    fn drop(&mut self) {
        let _restore = CtxGuard::save();
        if self.recorded.load(Ordering::Relaxed) {
            // A captured graph may still be replayed and write into the slots, reading the
            // recorded arrays: both are kept until the process ends (`retired`).
            if let Some(g) = self
                .inner
                .get_mut()
                .unwrap_or_else(|p| p.into_inner())
                .take()
            {
                let keep = std::mem::take(self.keep.get_mut().unwrap_or_else(|p| p.into_inner()));
                retire(g, keep);
            }
        } else if let Some(g) = self
            .inner
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            crate::detached_drop::drop_detached(g);
        }
    }
}
