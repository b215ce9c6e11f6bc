//! Cached Python objects (numpy, the package's error classes, PyTorch's and CuPy's stream
//! queries) and small helpers.
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyModule, PyType};
use std::collections::HashMap;
use std::sync::Mutex;

/// `numpy`.
pub(crate) fn numpy(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    Ok(NUMPY
        .get_or_try_init(py, || py.import("numpy").map(Bound::unbind))?
        .bind(py))
}

/// `numpy.asarray`.
pub(crate) fn asarray(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static ASARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    Ok(ASARRAY
        .get_or_try_init(py, || numpy(py)?.getattr("asarray").map(Bound::unbind))?
        .bind(py))
}

/// The framework an array comes from, by the module of its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    Torch,
    Cupy,
    Other,
}

pub(crate) fn owner_of(obj: &Bound<'_, PyAny>) -> Owner {
    type_facts(obj).owner
}

fn owner_of_type(ty: &Bound<'_, PyType>) -> Owner {
    let Ok(module) = ty.module() else {
        return Owner::Other;
    };
    let Ok(m) = module.to_cow() else {
        return Owner::Other;
    };
    let top = m.split('.').next().unwrap_or("");
    match top {
        "torch" => Owner::Torch,
        "cupy" | "cupy_backends" => Owner::Cupy,
        _ => Owner::Other,
    }
}

/// How an array of one type is read, decided once per type from its class attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proto {
    /// A `torch.Tensor` (or subclass): PyTorch's own accessors.
    TorchTensor,
    /// The class defines `__dlpack_device__` (and so `__dlpack__`).
    DLPack,
    /// The class defines `__cuda_array_interface__` (a property, or a class attribute) and no
    /// `__dlpack_device__`.
    Cai,
    /// Neither on the class: the object may carry them as instance attributes, so each call
    /// probes the object itself (the slow path, never cached).
    Probe,
}

/// How a stream object of one type yields its handle, decided once per type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamAccess {
    /// An int (or bool, refused) handle.
    Int,
    /// The class defines `__cuda_stream__`.
    Protocol,
    /// The class defines this attribute (`cuda_stream`, `ptr`, `handle`: index into
    /// [`STREAM_ATTRS`]).
    Attr(usize),
    /// Nothing on the class: probe the object.
    Probe,
}

/// The stream attributes tried, in order, after `__cuda_stream__`: PyTorch's, CuPy's, Numba's.
pub(crate) const STREAM_ATTRS: [&str; 3] = ["cuda_stream", "ptr", "handle"];

/// Everything cached about one Python type.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TypeFacts {
    pub(crate) owner: Owner,
    pub(crate) proto: Proto,
    pub(crate) stream: StreamAccess,
}

/// Types seen so far, by address. Each entry holds a strong reference to its type, so the
/// address cannot be freed and reused by another type while the entry exists.
type TypeCache = HashMap<usize, (Py<PyType>, TypeFacts)>;

/// Most types cached at once: past it the cache starts over (a program that makes types
/// without end still gets correct answers, at the slow path's price).
const TYPE_CACHE_MAX: usize = 256;

fn type_cache() -> &'static Mutex<TypeCache> {
    static CACHE: std::sync::OnceLock<Mutex<TypeCache>> = std::sync::OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The cached facts of `obj`'s type, computed on first sight of the type.
pub(crate) fn type_facts(obj: &Bound<'_, PyAny>) -> TypeFacts {
    let ty = obj.get_type();
    let key = ty.as_ptr() as usize;
    if let Some((_, f)) = type_cache()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&key)
    {
        return *f;
    }
    // Computed without the lock: it runs Python code (attribute lookups on the class).
    let facts = facts_of(obj.py(), &ty);
    let evicted = {
        let mut cache = type_cache().lock().unwrap_or_else(|p| p.into_inner());
        let evicted = if cache.len() >= TYPE_CACHE_MAX {
            std::mem::take(&mut *cache)
        } else {
            HashMap::new()
        };
        cache.insert(key, (ty.unbind(), facts));
        evicted
    };
    // Dropped outside the lock: a type's deallocation may run Python code.
    drop(evicted);
    facts
}

/// When `e` is the `AttributeError` of an accessor the cache chose for `obj`'s type (the class
/// changed since, or its property raises `AttributeError`): forgets the type, so the next call
/// decides again, and gives the error back as `Ok` for the caller to probe the object once
/// (and to chain onto its own `TypeError`). Any other error is the accessor's own: `Err`.
pub(crate) fn stale_accessor(obj: &Bound<'_, PyAny>, e: PyErr) -> PyResult<PyErr> {
    if !e.is_instance_of::<pyo3::exceptions::PyAttributeError>(obj.py()) {
        return Err(e);
    }
    let key = obj.get_type().as_ptr() as usize;
    let gone = type_cache()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&key);
    // Dropped outside the lock: a type's deallocation may run Python code.
    drop(gone);
    Ok(e)
}

/// Forgets every cached type (tests, and `sized_readback._native._clear_caches()`).
pub(crate) fn clear_type_cache() -> usize {
    let old = std::mem::take(&mut *type_cache().lock().unwrap_or_else(|p| p.into_inner()));
    let n = old.len();
    drop(old);
    n
}

/// Types in the cache now.
pub(crate) fn type_cache_len() -> usize {
    type_cache().lock().unwrap_or_else(|p| p.into_inner()).len()
}

fn facts_of(py: Python<'_>, ty: &Bound<'_, PyType>) -> TypeFacts {
    let owner = owner_of_type(ty);
    let has = |name: &str| ty.hasattr(name).unwrap_or(false);
    let torch_tensor = owner == Owner::Torch
        && torch(py)
            .ok()
            .and_then(|t| ty.is_subclass(t.tensor.bind(py)).ok())
            .unwrap_or(false);
    let proto = if torch_tensor {
        Proto::TorchTensor
    } else if has("__dlpack_device__") {
        Proto::DLPack
    } else if has("__cuda_array_interface__") {
        Proto::Cai
    } else {
        Proto::Probe
    };
    let int = py.get_type::<pyo3::types::PyInt>();
    let stream = if ty.is_subclass(&int).unwrap_or(false) {
        StreamAccess::Int
    } else if has("__cuda_stream__") {
        StreamAccess::Protocol
    } else {
        STREAM_ATTRS
            .iter()
            .position(|a| has(a))
            .map_or(StreamAccess::Probe, StreamAccess::Attr)
    };
    TypeFacts {
        owner,
        proto,
        stream,
    }
}

/// What the package needs of PyTorch, looked up once (only ever for objects of torch's
/// modules, so torch is imported by then).
pub(crate) struct Torch {
    pub(crate) tensor: Py<PyAny>,
    /// `torch._C._cuda_getCurrentRawStream(device) -> int`, or a fallback through
    /// `torch.cuda.current_stream(device).cuda_stream`.
    pub(crate) raw_stream: Py<PyAny>,
    pub(crate) raw_is_fast: bool,
    /// torch dtype -> (numpy kind, item size).
    pub(crate) dtypes: Py<PyDict>,
}

pub(crate) fn torch(py: Python<'_>) -> PyResult<&Torch> {
    static TORCH: PyOnceLock<Torch> = PyOnceLock::new();
    TORCH.get_or_try_init(py, || {
        let torch = py.import("torch")?;
        let c = torch.getattr("_C")?;
        let (raw_stream, raw_is_fast) = match c.getattr("_cuda_getCurrentRawStream") {
            Ok(f) => (f.unbind(), true),
            Err(_) => (
                torch.getattr("cuda")?.getattr("current_stream")?.unbind(),
                false,
            ),
        };
        let dtypes = PyDict::new(py);
        for (name, kind, size) in [
            ("bool", b'b', 1),
            ("uint8", b'u', 1),
            ("int8", b'i', 1),
            ("int16", b'i', 2),
            ("uint16", b'u', 2),
            ("int32", b'i', 4),
            ("uint32", b'u', 4),
            ("int64", b'i', 8),
            ("uint64", b'u', 8),
            ("float16", b'f', 2),
            ("bfloat16", b'B', 2),
            ("float32", b'f', 4),
            ("float64", b'f', 8),
            ("complex64", b'c', 8),
            ("complex128", b'c', 16),
        ] {
            if let Ok(dt) = torch.getattr(name) {
                dtypes.set_item(dt, (kind, size))?;
            }
        }
        Ok::<_, PyErr>(Torch {
            tensor: torch.getattr("Tensor")?.unbind(),
            raw_stream,
            raw_is_fast,
            dtypes: dtypes.unbind(),
        })
    })
}

/// PyTorch's current stream on `device`, as a raw handle.
pub(crate) fn torch_current_stream(py: Python<'_>, device: i32) -> PyResult<usize> {
    let t = torch(py)?;
    let s = t.raw_stream.bind(py).call1((device,))?;
    if t.raw_is_fast {
        s.extract()
    } else {
        s.getattr(intern!(py, "cuda_stream"))?.extract()
    }
}

/// CuPy's current stream, as a raw handle, and the stream object (kept alive while used).
pub(crate) fn cupy_current_stream(py: Python<'_>) -> PyResult<(usize, Py<PyAny>)> {
    static GET: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let get = GET.get_or_try_init(py, || {
        py.import("cupy.cuda")?
            .getattr("get_current_stream")
            .map(Bound::unbind)
    })?;
    let s = get.bind(py).call0()?;
    Ok((s.getattr("ptr")?.extract()?, s.unbind()))
}
