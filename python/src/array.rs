//! Reading a device array from Python: PyTorch tensors directly (their own accessors, the
//! fast path), anything else through `__dlpack__` or `__cuda_array_interface__` (v3).
use crate::dlpack::{self, DL_CUDA};
use crate::keep::Keep;
use crate::py_util::{stale_accessor, torch, type_facts, Proto};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// What must finish before the readback may read an array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum After {
    /// Nothing more: the producer already ordered its work before the enqueue stream
    /// (`__dlpack__(stream=...)`), or says no synchronization is needed.
    Nothing,
    /// Work on this stream (raw handle).
    Stream(usize),
    /// Work on PyTorch's current stream of this device (a tensor read directly).
    TorchCurrent(i32),
}

/// One device array: where it is, its element type and shape, and what to wait for.
#[derive(Debug)]
pub(crate) struct DeviceArray {
    pub(crate) ptr: u64,
    pub(crate) shape: Vec<i64>,
    /// numpy kind (`b i u f c V`, `B` for bfloat16).
    pub(crate) kind: u8,
    pub(crate) itemsize: usize,
    pub(crate) after: After,
}

impl DeviceArray {
    /// Elements; None if the product overflows (never for an array that passed
    /// [`check_shape`]).
    pub(crate) fn numel(&self) -> Option<i64> {
        self.shape.iter().try_fold(1i64, |n, &d| n.checked_mul(d))
    }
    /// The element type, numpy style (`float64`, `int32`, `bfloat16`, `V12`).
    pub(crate) fn type_name(&self) -> String {
        let bits = self.itemsize * 8;
        match self.kind {
            b'b' => "bool".into(),
            b'i' => format!("int{bits}"),
            b'u' => format!("uint{bits}"),
            b'f' => format!("float{bits}"),
            b'c' => format!("complex{bits}"),
            b'B' => "bfloat16".into(),
            _ => format!("V{}", self.itemsize),
        }
    }
}

/// The `stream` argument of `__dlpack__` for a consumer stream: the legacy default stream is
/// 1 there (0 is disallowed), the per-thread one 2, anything else its handle.
fn dlpack_stream(s: usize) -> usize {
    if s == 0 {
        1
    } else {
        s
    }
}

/// Refuses a shape with a negative dimension, or whose elements (its non-zero dimensions) times
/// `itemsize` bytes overflow: a product that wraps could pass the row-size check with another
/// size. Every later product of its dimensions then fits.
/// `what` names the array in the error (made only for one).
pub(crate) fn check_shape(
    shape: &[i64],
    itemsize: usize,
    what: impl Fn() -> String,
) -> PyResult<()> {
    if shape.iter().any(|&d| d < 0) {
        let what = what();
        return Err(PyValueError::new_err(format!(
            "{what} has shape {shape:?}: dimensions are 0 or more"
        )));
    }
    let bytes = i64::try_from(itemsize)
        .ok()
        .and_then(|b| shape.iter().try_fold(b, |n, &d| n.checked_mul(d.max(1))));
    if bytes.is_none() {
        let what = what();
        return Err(PyValueError::new_err(format!(
            "{what} has shape {shape:?} of {itemsize}-byte elements: its size overflows"
        )));
    }
    Ok(())
}

/// Whether `shape`/`strides` (in units of `unit`: 1 for DLPack's element strides, the item
/// size for CUDA Array Interface byte strides) are C-contiguous.
fn contiguous(shape: &[i64], strides: Option<&[i64]>, unit: i64) -> bool {
    let Some(st) = strides else { return true };
    if st.len() != shape.len() || shape.contains(&0) {
        return st.len() == shape.len();
    }
    let mut expect = unit;
    for i in (0..shape.len()).rev() {
        if shape[i] != 1 && st[i] != expect {
            return false;
        }
        // Fits once the shape passed check_shape; an overflow is no C-contiguous layout.
        match expect.checked_mul(shape[i]) {
            Some(e) => expect = e,
            None => return false,
        }
    }
    true
}

fn foreign(py: Python<'_>, what: &str, on: i64, device: i32) -> PyErr {
    crate::errors::make(
        py,
        "ForeignDeviceError",
        format!("{what} is on CUDA device {on}, the readback on device {device}"),
        &[],
    )
}

/// Reads `obj` as a device array of `device` whose work the readback will run after on
/// `stream`. Whatever must stay alive while the readback reads it is pushed onto `keep` (the
/// object itself, and a DLPack capsule).
///
/// Which protocol to read is decided once per type ([`type_facts`]); what the protocol says
/// (pointer, shape, dtype, device, contiguity, stream) is read and checked on every call,
/// since any of it may change between calls for the same object.
pub(crate) fn acquire(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    stream: usize,
    device: i32,
    what: &str,
    keep: &mut Keep,
) -> PyResult<DeviceArray> {
    let facts = type_facts(obj);
    // The AttributeError of an accessor the type cache chose: the object is probed once more.
    let mut stale = None;
    match facts.proto {
        Proto::TorchTensor => {
            if let Some(a) = torch_tensor(py, obj, device, what)? {
                keep.push(obj.clone().unbind());
                return Ok(a);
            }
            if let Ok(dev) = obj.getattr(intern!(py, "__dlpack_device__")) {
                let a = from_dlpack(py, obj, &dev, stream, device, what, keep)?;
                keep.push(obj.clone().unbind());
                return Ok(a);
            }
        }
        Proto::DLPack => match obj.getattr(intern!(py, "__dlpack_device__")) {
            Ok(dev) => {
                let a = from_dlpack(py, obj, &dev, stream, device, what, keep)?;
                keep.push(obj.clone().unbind());
                return Ok(a);
            }
            Err(e) => stale = Some(stale_accessor(obj, e)?),
        },
        Proto::Cai => match obj.getattr(intern!(py, "__cuda_array_interface__")) {
            Ok(cai) => {
                let a = from_cai(py, &cai, what)?;
                keep.push(obj.clone().unbind());
                return Ok(a);
            }
            Err(e) => stale = Some(stale_accessor(obj, e)?),
        },
        Proto::Probe => {}
    }
    if matches!(facts.proto, Proto::Probe) || stale.is_some() {
        if let Ok(dev) = obj.getattr(intern!(py, "__dlpack_device__")) {
            let a = from_dlpack(py, obj, &dev, stream, device, what, keep)?;
            keep.push(obj.clone().unbind());
            return Ok(a);
        }
        if let Ok(cai) = obj.getattr(intern!(py, "__cuda_array_interface__")) {
            let a = from_cai(py, &cai, what)?;
            keep.push(obj.clone().unbind());
            return Ok(a);
        }
    }
    let err = PyTypeError::new_err(format!(
        "{what} must be a CUDA device array (an object with __dlpack__ or \
         __cuda_array_interface__, e.g. a torch.Tensor, cupy.ndarray, jax.Array or numba \
         device array), not {}",
        obj.get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default()
    ));
    err.set_cause(py, stale);
    Err(err)
}

/// Whether `obj` is read through its CUDA Array Interface (so its `stream` entry may choose
/// the enqueue stream, read in the same pass).
pub(crate) fn reads_cai(py: Python<'_>, obj: &Bound<'_, PyAny>) -> bool {
    match type_facts(obj).proto {
        Proto::Cai => true,
        Proto::Probe => {
            !obj.hasattr(intern!(py, "__dlpack_device__"))
                .unwrap_or(false)
                && obj
                    .hasattr(intern!(py, "__cuda_array_interface__"))
                    .unwrap_or(false)
        }
        _ => false,
    }
}

/// A torch.Tensor through its own accessors; `None` for a dtype this does not know (the
/// DLPack path then decides).
///
/// Each accessor is a Python call (0.1–0.25 µs on the GPU host), so this reads no more than
/// the checks need. `is_cuda` stays beside `get_device()`: that is an index for any device
/// type (`xpu:0`, `mps:0`), and a graph's recorded pack checks no address. Contiguity is asked
/// only of a tensor of two or more elements (a count never is: torch's own answer for one
/// element or none is true whatever the strides), and the conjugate and negative bits only of
/// the dtypes the public API puts them on (`conj()` of a complex tensor, `.imag` of that); only
/// the private `torch._neg_view` sets the negative bit on an integer tensor.
fn torch_tensor(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    device: i32,
    what: &str,
) -> PyResult<Option<DeviceArray>> {
    let t = torch(py)?;
    let dtype = obj.getattr(intern!(py, "dtype"))?;
    let Some(kind) = t.dtypes.bind(py).get_item(&dtype)? else {
        return Ok(None);
    };
    let (kind, itemsize): (u8, usize) = kind.extract()?;
    let on: i64 = obj.call_method0(intern!(py, "get_device"))?.extract()?;
    if on < 0 || !obj.getattr(intern!(py, "is_cuda"))?.extract::<bool>()? {
        return Err(PyValueError::new_err(format!(
            "{what} is a torch tensor on {}, not on a CUDA device",
            obj.getattr(intern!(py, "device"))?.str()?
        )));
    }
    if on != device as i64 {
        return Err(foreign(py, what, on, device));
    }
    let shape: Vec<i64> = obj.getattr(intern!(py, "shape"))?.extract()?;
    if !shape.contains(&0)
        && shape.iter().any(|&d| d > 1)
        && !obj
            .call_method0(intern!(py, "is_contiguous"))?
            .extract::<bool>()?
    {
        return Err(PyValueError::new_err(format!(
            "{what} is not contiguous: pass .contiguous() (rows are read as one block)"
        )));
    }
    // A lazy conjugate (`x.conj()`) or negation (its `.imag`) shares the memory of the values
    // before it: read as bytes, every row would come back unconjugated or with the wrong sign.
    let lazy = |view: &str| {
        PyValueError::new_err(format!(
            "{what} is a lazy {view} view (its memory holds the values before it): pass \
             .resolve_conj().resolve_neg()"
        ))
    };
    if kind == b'c'
        && obj
            .call_method0(intern!(py, "is_conj"))?
            .extract::<bool>()?
    {
        return Err(lazy("conjugate"));
    }
    if matches!(kind, b'c' | b'f' | b'B')
        && obj.call_method0(intern!(py, "is_neg"))?.extract::<bool>()?
    {
        return Err(lazy("negation"));
    }
    let ptr: u64 = obj.call_method0(intern!(py, "data_ptr"))?.extract()?;
    Ok(Some(DeviceArray {
        ptr,
        shape,
        kind,
        itemsize,
        after: After::TorchCurrent(device),
    }))
}

fn from_dlpack(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    dev: &Bound<'_, PyAny>,
    stream: usize,
    device: i32,
    what: &str,
    keep: &mut Keep,
) -> PyResult<DeviceArray> {
    let (dt, id): (i32, i64) = dev.call0()?.extract()?;
    if dt != DL_CUDA {
        let name = match dt {
            1 => " (CPU)",
            3 => " (CUDA pinned host memory)",
            13 => " (CUDA managed memory)",
            _ => "",
        };
        return Err(PyValueError::new_err(format!(
            "{what} is not in CUDA device memory: its DLPack device type is {dt}{name}, \
             not kDLCUDA (2)"
        )));
    }
    if id != device as i64 {
        return Err(foreign(py, what, id, device));
    }
    let kwargs = PyDict::new(py);
    kwargs.set_item(intern!(py, "stream"), dlpack_stream(stream))?;
    let (capsule, after) = match obj.call_method(intern!(py, "__dlpack__"), (), Some(&kwargs)) {
        Ok(c) => (c, After::Nothing),
        // A producer that predates the stream argument: it synchronized for the legacy
        // default stream, if at all.
        Err(e) if e.is_instance_of::<PyTypeError>(py) => (
            obj.call_method0(intern!(py, "__dlpack__"))?,
            After::Stream(0),
        ),
        Err(e) => return Err(e),
    };
    let d = dlpack::describe(&capsule)?;
    keep.push(capsule.unbind());
    if d.device.device_type != DL_CUDA {
        return Err(PyValueError::new_err(format!(
            "{what}'s DLPack tensor is on device type {}, not kDLCUDA (2)",
            d.device.device_type
        )));
    }
    if d.device.device_id != device {
        return Err(foreign(py, what, d.device.device_id as i64, device));
    }
    let (kind, itemsize) = dlpack::kind_of(d.dtype)?;
    check_shape(&d.shape, itemsize, || what.to_string())?;
    if !contiguous(&d.shape, d.strides.as_deref(), 1) {
        return Err(PyValueError::new_err(format!(
            "{what} is not C-contiguous (shape {:?}, strides {:?} elements): rows are read as \
             one block",
            d.shape,
            d.strides.unwrap_or_default()
        )));
    }
    Ok(DeviceArray {
        ptr: d.ptr,
        shape: d.shape,
        kind,
        itemsize,
        after,
    })
}

/// Parses a typestr such as `<f8`, `|b1`, `<V12`: (kind, item size).
fn parse_typestr(t: &str, what: &str) -> PyResult<(u8, usize)> {
    let bad = || {
        PyValueError::new_err(format!(
            "{what} has __cuda_array_interface__ typestr {t:?}, which is not a plain \
             little-endian type"
        ))
    };
    let b = t.as_bytes();
    if b.len() < 3 || !matches!(b[0], b'<' | b'|' | b'=') {
        return Err(bad());
    }
    let kind = match b[1] {
        k @ (b'b' | b'i' | b'u' | b'f' | b'c' | b'V') => k,
        _ => return Err(bad()),
    };
    let size: usize = t[2..].parse().map_err(|_| bad())?;
    if size == 0 {
        return Err(bad());
    }
    Ok((kind, size))
}

pub(crate) fn from_cai<'py>(
    py: Python<'py>,
    cai: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<DeviceArray> {
    let d = cai.cast::<PyDict>().map_err(|_| {
        PyTypeError::new_err(format!("{what}.__cuda_array_interface__ is not a dict"))
    })?;
    let get = |k: &Bound<'py, pyo3::types::PyString>| -> PyResult<Option<Bound<'py, PyAny>>> {
        Ok(d.get_item(k)?.filter(|v| !v.is_none()))
    };
    let missing =
        |k: &str| PyValueError::new_err(format!("{what}.__cuda_array_interface__ has no {k:?}"));
    let shape: Vec<i64> = get(intern!(py, "shape"))?
        .ok_or_else(|| missing("shape"))?
        .extract()?;
    let typestr: String = get(intern!(py, "typestr"))?
        .ok_or_else(|| missing("typestr"))?
        .extract()?;
    let (ptr, _readonly): (u64, bool) = get(intern!(py, "data"))?
        .ok_or_else(|| missing("data"))?
        .extract()?;
    if get(intern!(py, "mask"))?.is_some() {
        return Err(PyValueError::new_err(format!(
            "{what} is a masked array: the readback reads every element"
        )));
    }
    let (kind, itemsize) = parse_typestr(&typestr, what)?;
    check_shape(&shape, itemsize, || {
        format!("{what}.__cuda_array_interface__")
    })?;
    let strides: Option<Vec<i64>> = get(intern!(py, "strides"))?
        .map(|s| s.extract())
        .transpose()?;
    if !contiguous(&shape, strides.as_deref(), itemsize as i64) {
        return Err(PyValueError::new_err(format!(
            "{what} is not C-contiguous (shape {shape:?}, strides {:?} bytes): rows are read \
             as one block",
            strides.unwrap_or_default()
        )));
    }
    // Version 3: the stream the consumer must synchronize with (None: none needed).
    let after = match get(intern!(py, "stream"))? {
        Some(s) => {
            let s: i64 = s.extract()?;
            if s <= 0 {
                return Err(PyValueError::new_err(format!(
                    "{what}.__cuda_array_interface__ has stream {s}, which the CUDA Array \
                     Interface disallows"
                )));
            }
            After::Stream(s as usize)
        }
        None => After::Nothing,
    };
    Ok(DeviceArray {
        ptr,
        shape,
        kind,
        itemsize,
        after,
    })
}
