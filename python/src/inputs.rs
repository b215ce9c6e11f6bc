//! An enqueue's inputs from Python: the data (one array, or one per column), the count, the
//! stream, what to keep alive, and the producers' streams to wait for.
use crate::array::{acquire, from_cai, reads_cai, After, DeviceArray};
use crate::keep::Keep;
use crate::py_util::{stale_accessor, torch_current_stream};
use crate::shared::Shared;
use crate::spec::ColSpec;
use crate::stream::resolve;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use srb::{ColumnSource, CountKind, RawCount};

/// The count kind of a 0-d (or one-element) device array.
pub(crate) fn count_kind(a: &DeviceArray) -> PyResult<CountKind> {
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
pub(crate) fn numpy_name(k: CountKind) -> String {
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
                Err(e) => drop(stale_accessor(o, e)?),
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

/// A count kind by its numpy name (`"int32"`, `"uint64"`, ...: the count types' table).
pub(crate) fn count_kind_named(name: &str) -> PyResult<CountKind> {
    CountKind::ALL
        .into_iter()
        .find(|&k| numpy_name(k) == name)
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "count_kind must be {}, not {name:?}",
                numpy_names()
            ))
        })
}
