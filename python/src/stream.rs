//! Streams: the handle of a framework's stream object, and the stream an enqueue runs on when
//! none is given.
use crate::py_util::{
    cupy_current_stream, owner_of, stale_accessor, torch_current_stream, type_facts, Owner,
    StreamAccess, STREAM_ATTRS,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt};

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
        } else if let Ok(int) = v.getattr(intern!(py, "__int__")) {
            int.call0()?.extract()?
        } else {
            // Not a handle at all: a TypeError, as for the stream object itself.
            return Err(PyTypeError::new_err(format!(
                "a stream handle is an int, not {}",
                v.get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            )));
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

/// Legacy default stream handles: null and `CU_STREAM_LEGACY` (1) are the same stream.
pub(crate) fn same_stream(a: usize, b: usize) -> bool {
    let norm = |s: usize| if s == 1 { 0 } else { s };
    norm(a) == norm(b)
}
