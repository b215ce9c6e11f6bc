//! Cached Python objects (numpy, the package's error classes, PyTorch's and CuPy's stream
//! queries) and small helpers.
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyModule};

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
    let Ok(module) = obj.get_type().module() else {
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
        s.getattr("cuda_stream")?.extract()
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

/// A readback's settings and slot layout ([`srb::ReadbackInfo`]) as the `info` dict of every
/// Python readback class, with the device ordinal.
pub(crate) fn info_dict<'py>(
    py: Python<'py>,
    info: &srb::ReadbackInfo,
    device: i32,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("capacity", info.capacity)?;
    d.set_item("slots", info.slots)?;
    d.set_item("buckets", info.buckets)?;
    d.set_item("spill_capacity", info.spill_capacity)?;
    d.set_item("transport", crate::readback::transport_name(info.transport))?;
    d.set_item(
        "staged_copy",
        crate::readback::staged_copy_name(info.staged_copy),
    )?;
    let wait = match info.wait_mode {
        srb::WaitMode::Event => "event",
        _ => "trailer",
    };
    d.set_item("wait_mode", wait)?;
    d.set_item("device", device)?;
    d.set_item("slot_bytes", info.layout.slot_stride())?;
    d.set_item("column_offsets", info.layout.column_offsets().to_vec())?;
    d.set_item("trailer_offset", info.layout.trailer_offset())?;
    d.set_item("programmatic_launch", info.launch_shape.programmatic)?;
    Ok(d)
}
