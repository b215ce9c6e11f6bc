//! `Ticket`: one enqueued readback, pack or append, until its `Readout`.
use crate::core_ticket::Core;
use crate::deferred::Pool;
use crate::driver::CtxGuard;
use crate::errors::IntoPy;
use crate::keep::Keep;
use crate::readout::{column_bytes, ColumnBytes, Readout};
use crate::shared::Shared;
use crate::spec::ColSpec;
use crate::wait_clock::WaitClock;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use srb::ColumnReadout;
use std::sync::Arc;

enum State {
    Pending,
    Done(Py<Readout>),
    /// The error, never raised itself: each `wait()` raises a copy (see [`raise_copy`]).
    Failed(PyErr),
}

/// A copy of the ticket's error to raise, so that the one the ticket keeps never gets a
/// traceback. A raised exception's traceback holds the frames it passed through, and those
/// usually hold the ticket: ticket -> error -> traceback -> frame -> ticket is a cycle that
/// Python's collector cannot see into (the ticket is a native object), and it would keep the
/// readback's slots allocated for the rest of the process.
fn raise_copy(py: Python<'_>, kept: &PyErr) -> PyErr {
    let value = kept.value(py);
    match py
        .import(pyo3::intern!(py, "copy"))
        .and_then(|m| m.getattr(pyo3::intern!(py, "copy")))
        .and_then(|copy| copy.call1((value,)))
    {
        Ok(c) => PyErr::from_value(c),
        // The kept error itself rather than none (a copy fails only without memory).
        Err(_) => kept.clone_ref(py),
    }
}

/// One enqueued readback: wait on it (`wait()`), poll it (`done()`).
///
/// When a dropped ticket frees its slot (see `Drop`): once waited on, the slot is the
/// readout's, which the ticket keeps (freed when ticket, readout and views are all gone, or
/// at `release()`); never waited on and complete at the drop, at the drop; dropped in flight
/// from `enqueue(keep=True)`, when that readback's next enqueue (or one finding every slot
/// held, or its drop) sees it complete; dropped in flight without kept objects
/// (`keep=False`, `_enqueue_raw`, appends), at the drop (the core orders the slot's reuse).
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
    /// The ticket of a pack into slot set `pool`, numbered `seq` by its readback.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn pack(
        pool: Pool,
        transport: &'static str,
        seq: u64,
        ticket: srb::ColumnTicket,
        keep: Keep,
        shared: Arc<Shared>,
        specs: Arc<Vec<ColSpec>>,
        columns: bool,
    ) -> Self {
        Ticket {
            pool,
            transport,
            seq,
            core: Some(Core::Pack(ticket)),
            keep,
            shared,
            specs,
            columns,
            state: State::Pending,
        }
    }

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
                let raised = raise_copy(py, &err);
                self.state = State::Failed(err);
                Err(raised)
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
            State::Failed(e) => return Err(raise_copy(py, e)),
            State::Pending => {}
        }
        let clock = WaitClock::start(timeout)?;
        let _restore = CtxGuard::save_unless(&self.shared.ctx);
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
            self.shared.deferred.defer(self.pool, core, keep);
        } else {
            drop(core);
            drop(keep);
        }
    }
}
