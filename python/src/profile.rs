//! `Readback._profile`: the host time of each phase of an enqueue, timed inside the binding
//! (measurement only: python/bench/profile_binding.py).
use crate::array::After;
use crate::deferred::Pool;
use crate::driver::CtxGuard;
use crate::errors::to_py;
use crate::inputs::parse_inputs;
use crate::py_util::torch_current_stream;
use crate::settings::transport_name;
use crate::shared::Shared;
use crate::spec::ColSpec;
use crate::ticket::Ticket;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use srb::cudarc::driver::sys::CUstream;
use srb::ColumnReadback;
use std::sync::Arc;
use std::time::Instant;

/// The readback profiled: its (mapped) slot set and what its tickets share.
pub(crate) struct Target<'a> {
    pub(crate) rb: &'a ColumnReadback,
    pub(crate) pool: Pool,
    pub(crate) shared: &'a Arc<Shared>,
    pub(crate) specs: &'a Arc<Vec<ColSpec>>,
    pub(crate) columns: bool,
}

/// The phases, in the order `run` times them.
const PHASES: [&str; 8] = [
    "ctx_guard",
    "sweep",
    "parse",
    "stream_lookup",
    "bind_order",
    "core_enqueue",
    "ticket",
    "event_record",
];

/// See `Readback._profile`.
pub(crate) fn run<'py>(
    py: Python<'py>,
    target: &Target<'_>,
    data: &Bound<'py, PyAny>,
    count: &Bound<'py, PyAny>,
    reps: usize,
    before: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let Target {
        rb,
        pool,
        shared,
        specs,
        columns,
    } = *target;
    let reps = reps.max(1);
    let mut t: [Vec<u64>; 8] = Default::default();
    let ns = |a: Instant| a.elapsed().as_nanos() as u64;
    let _restore = CtxGuard::save();
    shared.bind(py)?;
    // Declared after the guard: destroyed before the caller's context is put back.
    let ev = srb::StreamJoin::new(&shared.ctx).map_err(|e| to_py(py, e))?;
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
        shared.deferred.sweep();
        t[1].push(ns(a));
        let a = Instant::now();
        let inp = match parse_inputs(py, shared.device, specs, columns, data, count, None) {
            Ok(i) => i,
            Err(e) => {
                result = Err(e);
                break;
            }
        };
        t[2].push(ns(a));
        if inp.torch_current.is_some() {
            let a = Instant::now();
            let _ = torch_current_stream(py, shared.device);
            t[3].push(ns(a));
        }
        let a = Instant::now();
        let mut producers = Vec::new();
        for &af in &inp.afters {
            if let After::Stream(p) = af {
                producers.push(p);
            }
        }
        let ordered = shared.bind(py).and_then(|()| {
            // SAFETY: as in `inputs`: the producers' and the enqueue stream are live.
            unsafe { shared.order_after(py, &producers, inp.stream) }
        });
        t[4].push(ns(a));
        if let Err(e) = ordered {
            result = Err(e);
            break;
        }
        let a = Instant::now();
        // SAFETY: as in `Readback.enqueue`; `inp.keep` holds the arrays until the wait below.
        let r =
            unsafe { rb.enqueue_raw_stream(inp.stream as CUstream, None, &inp.sources, inp.count) };
        t[5].push(ns(a));
        let ticket = match r {
            Ok(tk) => tk,
            Err(e) => {
                result = Err(to_py(py, e));
                break;
            }
        };
        let a = Instant::now();
        // SAFETY: the stream is live (it just took the pack); the context is bound.
        let _ = unsafe { ev.record(inp.stream as CUstream) };
        t[7].push(ns(a));
        let _ = py.detach(|| ticket.wait().map(|r| r.count()));
        let a = Instant::now();
        let seq = ticket.seq();
        let obj = Py::new(
            py,
            Ticket::pack(
                pool,
                transport_name(ticket.transport()),
                seq,
                ticket,
                inp.keep,
                shared.clone(),
                specs.clone(),
                columns,
            ),
        )?;
        drop(obj);
        t[6].push(ns(a));
    }
    result?;
    let d = PyDict::new(py);
    for (name, v) in PHASES.iter().zip(t.iter_mut()) {
        if v.is_empty() {
            continue;
        }
        v.sort_unstable();
        d.set_item(*name, v[v.len() / 2])?;
    }
    d.set_item("reps", reps)?;
    Ok(d)
}
