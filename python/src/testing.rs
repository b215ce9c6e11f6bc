//! Hooks for the tests that need no GPU: argument parsing as an enqueue does it (without its
//! driver calls), and readouts over host memory. Not API: names start with an underscore.
use crate::array::After;
use crate::inputs::parse_inputs;
use crate::readout::{ColumnBytes, HeldSlot, Holder, Readout};
use crate::spec::parse_columns;
use crate::stream::{handle_of, resolve};
use crate::wait_clock::WaitClock;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::sync::Arc;

/// The limit, in seconds, that `Ticket.wait(timeout)` and `GraphReadback.next(timeout)` put on
/// their wait (`None`: no limit), or their `ValueError`.
#[pyfunction]
#[pyo3(signature = (timeout=None))]
fn _wait_limit(timeout: Option<f64>) -> PyResult<Option<f64>> {
    Ok(WaitClock::start(timeout)?.limit().map(|d| d.as_secs_f64()))
}

/// What an enqueue would read from `data`, `count` and `stream` for a readback of `dtype` /
/// `columns` on `device`: a dict of `stream`, `ptrs`, `rows`, `count_ptr`, `count_kind`,
/// `afters` (None, `("stream", handle)` or `("torch", device)`) and `kept` (objects held).
#[pyfunction]
#[pyo3(signature = (data, count, stream=None, dtype=None, columns=None, device=0))]
fn _parse_inputs<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    count: &Bound<'py, PyAny>,
    stream: Option<&Bound<'py, PyAny>>,
    dtype: Option<&Bound<'py, PyAny>>,
    columns: Option<&Bound<'py, PyAny>>,
    device: i32,
) -> PyResult<Bound<'py, PyDict>> {
    let (specs, is_columns) = parse_columns(py, dtype, columns)?;
    let inp = parse_inputs(py, device, &specs, is_columns, data, count, stream)?;
    let d = PyDict::new(py);
    d.set_item("stream", inp.stream)?;
    d.set_item(
        "ptrs",
        inp.sources.iter().map(|s| s.ptr).collect::<Vec<_>>(),
    )?;
    d.set_item(
        "rows",
        inp.sources.iter().map(|s| s.len).collect::<Vec<_>>(),
    )?;
    d.set_item("count_ptr", inp.count.ptr())?;
    d.set_item("count_kind", inp.count.kind().name())?;
    let afters = PyList::empty(py);
    for a in &inp.afters {
        match a {
            After::Nothing => afters.append(py.None())?,
            After::Stream(s) => afters.append(("stream", *s))?,
            After::TorchCurrent(dev) => afters.append(("torch", *dev))?,
        }
    }
    d.set_item("afters", afters)?;
    d.set_item("kept", inp.keep.len())?;
    Ok(d)
}

/// Median nanoseconds of one read of `data`, `count` and `stream` as an enqueue does it (no
/// driver call), timed inside the binding over `reps` reads, the columns parsed once.
#[pyfunction]
#[pyo3(signature = (data, count, stream=None, dtype=None, columns=None, device=0, reps=1000))]
#[allow(clippy::too_many_arguments)]
fn _time_parse<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    count: &Bound<'py, PyAny>,
    stream: Option<&Bound<'py, PyAny>>,
    dtype: Option<&Bound<'py, PyAny>>,
    columns: Option<&Bound<'py, PyAny>>,
    device: i32,
    reps: usize,
) -> PyResult<u64> {
    let (specs, is_columns) = parse_columns(py, dtype, columns)?;
    let mut t = Vec::with_capacity(reps.max(1));
    for _ in 0..reps.max(1) {
        let a = std::time::Instant::now();
        let inp = parse_inputs(py, device, &specs, is_columns, data, count, stream)?;
        t.push(a.elapsed().as_nanos() as u64);
        drop(inp);
    }
    t.sort_unstable();
    Ok(t[t.len() / 2])
}

/// The raw handle of a stream argument.
#[pyfunction]
fn _stream_handle(py: Python<'_>, stream: &Bound<'_, PyAny>) -> PyResult<usize> {
    handle_of(py, stream)
}

/// The stream an enqueue of `first` with `stream` would run on.
#[pyfunction]
#[pyo3(signature = (stream=None, first=None, device=0))]
fn _resolve_stream(
    py: Python<'_>,
    stream: Option<&Bound<'_, PyAny>>,
    first: Option<&Bound<'_, PyAny>>,
    device: i32,
) -> PyResult<usize> {
    let cai = match first {
        Some(f) if stream.is_none_or(|s| s.is_none()) && crate::array::reads_cai(py, f) => {
            let a = crate::array::from_cai(py, &f.getattr("__cuda_array_interface__")?, "first")?;
            match a.after {
                After::Stream(s) if s > 1 => Some(s),
                _ => Some(0),
            }
        }
        _ => None,
    };
    Ok(resolve(py, stream, first, device, cai)?.handle)
}

/// A readout of the first `count` rows of host numpy arrays (one per column, C-contiguous),
/// for readbacks of `dtype` / `columns`: the arrays stand in for the slot.
#[pyfunction]
#[pyo3(signature = (arrays, count, dtype=None, columns=None))]
fn _host_readout(
    py: Python<'_>,
    arrays: Vec<Bound<'_, PyAny>>,
    count: usize,
    dtype: Option<&Bound<'_, PyAny>>,
    columns: Option<&Bound<'_, PyAny>>,
) -> PyResult<Readout> {
    let (specs, is_columns) = parse_columns(py, dtype, columns)?;
    if arrays.len() != specs.len() {
        return Err(PyValueError::new_err("one array per column"));
    }
    let mut cols = Vec::new();
    for (a, s) in arrays.iter().zip(&specs) {
        let iface = a.getattr("__array_interface__")?;
        let (ptr, _): (usize, bool) = iface.get_item("data")?.extract()?;
        let contiguous: bool = a.getattr("flags")?.getattr("c_contiguous")?.extract()?;
        let nbytes: usize = a.getattr("nbytes")?.extract()?;
        let need = count.checked_mul(s.elem_size);
        if !contiguous || need.is_none_or(|need| nbytes < need) {
            return Err(PyValueError::new_err(
                "each array is C-contiguous with at least count rows",
            ));
        }
        cols.push(ColumnBytes { ptr });
    }
    let held = HeldSlot::new(Holder::Host(
        arrays.into_iter().map(Bound::unbind).collect(),
    ));
    Ok(Readout::new(
        held,
        count,
        1,
        cols,
        Arc::new(specs),
        is_columns,
    ))
}

/// What the per-type cache holds for `obj`'s type (computing it on first sight):
/// `(owner, proto, stream_access)`, e.g. `("other", "cai", "probe")`.
#[pyfunction]
fn _type_facts(obj: &Bound<'_, PyAny>) -> (String, String, String) {
    let f = crate::py_util::type_facts(obj);
    let owner = format!("{:?}", f.owner).to_lowercase();
    let proto = format!("{:?}", f.proto).to_lowercase();
    let stream = match f.stream {
        crate::py_util::StreamAccess::Attr(i) => crate::py_util::STREAM_ATTRS[i].to_string(),
        s => format!("{s:?}").to_lowercase(),
    };
    (owner, proto, stream)
}

/// Empties the per-type cache; returns how many types it held.
#[pyfunction]
fn _clear_type_cache() -> usize {
    crate::py_util::clear_type_cache()
}

/// Types in the per-type cache.
#[pyfunction]
fn _type_cache_len() -> usize {
    crate::py_util::type_cache_len()
}

/// Whether numpy views are made through numpy's C API (else through `numpy.asarray`).
#[pyfunction]
fn _numpy_capi(py: Python<'_>) -> bool {
    crate::npy::available(py)
}

pub(crate) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_wait_limit, m)?)?;
    m.add_function(wrap_pyfunction!(_type_facts, m)?)?;
    m.add_function(wrap_pyfunction!(_time_parse, m)?)?;
    m.add_function(wrap_pyfunction!(_clear_type_cache, m)?)?;
    m.add_function(wrap_pyfunction!(_type_cache_len, m)?)?;
    m.add_function(wrap_pyfunction!(_numpy_capi, m)?)?;
    m.add_function(wrap_pyfunction!(_parse_inputs, m)?)?;
    m.add_function(wrap_pyfunction!(_stream_handle, m)?)?;
    m.add_function(wrap_pyfunction!(_resolve_stream, m)?)?;
    m.add_function(wrap_pyfunction!(_host_readout, m)?)?;
    Ok(())
}
