//! Graph readbacks and sized launches dropped after they recorded into a graph: a captured
//! graph may still be replayed and write into their memory, reading the arrays they recorded,
//! so both stay allocated past the drop. They are freed when the interpreter exits (`release_retired`,
//! which the package registers with `atexit`), once their context has finished every replay
//! already launched; no graph that recorded them may be launched after that.
use pyo3::prelude::*;
use std::sync::{Arc, Mutex, MutexGuard};

/// One retired object: its core (a graph readback's slots and events, or a sized launch's
/// status memory and class setter), its context, and the arrays it recorded.
struct Retired {
    ctx: Arc<srb::cudarc::driver::CudaContext>,
    core: Box<dyn std::any::Any + Send>,
    keep: Vec<Py<PyAny>>,
}

static RETIRED: Mutex<Vec<Retired>> = Mutex::new(Vec::new());

fn retired() -> MutexGuard<'static, Vec<Retired>> {
    RETIRED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Keeps a dropped graph readback that recorded into a graph, and its arrays, to the end of
/// the process.
pub(crate) fn retire(graph: Arc<srb::GraphReadback>, keep: Vec<Py<PyAny>>) {
    let ctx = graph.info().context.clone();
    retired().push(Retired {
        ctx,
        core: Box::new(graph),
        keep,
    });
}

/// Keeps a dropped sized launch that was recorded into a graph (its status memory and class
/// setter, which the graph's replays use), and what its bodies read, to the end of the process.
pub(crate) fn retire_launch(launch: srb::SizedLaunch, keep: Vec<Py<PyAny>>) {
    let ctx = launch.context().clone();
    retired().push(Retired {
        ctx,
        core: Box::new(launch),
        keep,
    });
}

/// Frees every graph readback dropped after recording (and the arrays it kept), once its
/// context has finished all work already launched. The package calls it at interpreter exit;
/// a graph that recorded one of them must not be launched afterwards. Returns how many it
/// freed. A context that fails to synchronize (a device fault) keeps its readbacks: freeing
/// memory that faulted work may still touch is not safe, and the context is lost anyway.
#[pyfunction]
pub(crate) fn release_retired(py: Python<'_>) -> usize {
    let _restore = srb::device::ContextGuard::save();
    let all = std::mem::take(&mut *retired());
    let mut freed = 0;
    let mut kept = Vec::new();
    for Retired { ctx, core, keep } in all {
        let done = py.detach(|| srb::device::bind(&ctx).is_ok() && ctx.synchronize().is_ok());
        if done {
            // The core first: its drop waits for nothing the arrays feed any more.
            drop(core);
            drop(keep);
            freed += 1;
        } else {
            kept.push(Retired { ctx, core, keep });
        }
    }
    retired().extend(kept);
    freed
}

/// How many dropped graph readbacks are kept until `release_retired`.
#[pyfunction]
pub(crate) fn retired_count() -> usize {
    retired().len()
}
