//! DLPack (<https://dmlc.github.io/dlpack/latest/>): the C structs of `dlpack.h`, reading a
//! producer's capsule, and exporting a readout's host memory as one.
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use std::ffi::{c_void, CStr};

/// `kDLCPU`.
pub(crate) const DL_CPU: i32 = 1;
/// `kDLCUDA`.
pub(crate) const DL_CUDA: i32 = 2;

/// `DLDevice`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct DLDevice {
    pub(crate) device_type: i32,
    pub(crate) device_id: i32,
}

/// `DLDataType`: `code` is kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLComplex 5, kDLBool 6.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct DLDataType {
    pub(crate) code: u8,
    pub(crate) bits: u8,
    pub(crate) lanes: u16,
}

/// `DLTensor`.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct DLTensor {
    pub(crate) data: *mut c_void,
    pub(crate) device: DLDevice,
    pub(crate) ndim: i32,
    pub(crate) dtype: DLDataType,
    pub(crate) shape: *mut i64,
    /// Strides in elements; null means compact row-major.
    pub(crate) strides: *mut i64,
    pub(crate) byte_offset: u64,
}

/// `DLManagedTensor` (the unversioned capsule, name `"dltensor"`).
#[repr(C)]
pub(crate) struct DLManagedTensor {
    pub(crate) dl_tensor: DLTensor,
    pub(crate) manager_ctx: *mut c_void,
    pub(crate) deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLPackVersion`.
#[repr(C)]
pub(crate) struct DLPackVersion {
    pub(crate) major: u32,
    pub(crate) minor: u32,
}

/// `DLManagedTensorVersioned` (DLPack 1.x, capsule name `"dltensor_versioned"`).
#[repr(C)]
pub(crate) struct DLManagedTensorVersioned {
    pub(crate) version: DLPackVersion,
    pub(crate) manager_ctx: *mut c_void,
    pub(crate) deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    pub(crate) flags: u64,
    pub(crate) dl_tensor: DLTensor,
}

const LEGACY: &CStr = c"dltensor";
const VERSIONED: &CStr = c"dltensor_versioned";

/// What a producer's capsule describes, copied out of it (the capsule stays alive, and
/// unconsumed, for as long as the memory is read: its own destructor then calls the deleter).
#[derive(Debug)]
pub(crate) struct Described {
    pub(crate) ptr: u64,
    pub(crate) device: DLDevice,
    pub(crate) dtype: DLDataType,
    pub(crate) shape: Vec<i64>,
    /// In elements; `None` for compact row-major.
    pub(crate) strides: Option<Vec<i64>>,
}

/// Reads the tensor a `__dlpack__` capsule holds, without consuming it.
pub(crate) fn describe(capsule: &Bound<'_, PyAny>) -> PyResult<Described> {
    let obj = capsule.as_ptr();
    // SAFETY: PyCapsule_IsValid accepts any object and only reads it; the GIL is held.
    let (versioned, legacy) = unsafe {
        (
            ffi::PyCapsule_IsValid(obj, VERSIONED.as_ptr()) == 1,
            ffi::PyCapsule_IsValid(obj, LEGACY.as_ptr()) == 1,
        )
    };
    // SAFETY: the capsule is valid under the name checked; a producer's DLPack capsule holds
    // a DLManagedTensor(Versioned) that lives until the capsule's deleter runs, which cannot
    // happen while we hold the capsule (borrowed here, kept alive by the caller after).
    let t: &DLTensor = unsafe {
        if versioned {
            let p = ffi::PyCapsule_GetPointer(obj, VERSIONED.as_ptr())
                as *const DLManagedTensorVersioned;
            if p.is_null() {
                return Err(PyErr::fetch(capsule.py()));
            }
            if (*p).version.major != 1 {
                return Err(PyValueError::new_err(format!(
                    "DLPack version {}.{} is not supported (1.x is)",
                    (*p).version.major,
                    (*p).version.minor
                )));
            }
            &(*p).dl_tensor
        } else if legacy {
            let p = ffi::PyCapsule_GetPointer(obj, LEGACY.as_ptr()) as *const DLManagedTensor;
            if p.is_null() {
                return Err(PyErr::fetch(capsule.py()));
            }
            &(*p).dl_tensor
        } else {
            return Err(PyValueError::new_err(
                "__dlpack__ returned something other than an unconsumed DLPack capsule",
            ));
        }
    };
    let ndim = usize::try_from(t.ndim)
        .map_err(|_| PyValueError::new_err("a DLPack tensor with negative ndim"))?;
    let read = |p: *const i64| -> Vec<i64> {
        if ndim == 0 || p.is_null() {
            Vec::new()
        } else {
            // SAFETY: DLPack: shape (and strides, when not null) hold ndim values.
            unsafe { std::slice::from_raw_parts(p, ndim) }.to_vec()
        }
    };
    if ndim > 0 && t.shape.is_null() {
        return Err(PyValueError::new_err("a DLPack tensor without a shape"));
    }
    Ok(Described {
        ptr: (t.data as u64).wrapping_add(t.byte_offset),
        device: t.device,
        dtype: t.dtype,
        shape: read(t.shape),
        strides: (!t.strides.is_null()).then(|| read(t.strides)),
    })
}

/// The numpy kind and item size of a DLPack dtype (`b'B'` for bfloat16, which numpy lacks).
pub(crate) fn kind_of(dt: DLDataType) -> PyResult<(u8, usize)> {
    if dt.lanes != 1 || dt.bits == 0 || !dt.bits.is_multiple_of(8) {
        return Err(PyValueError::new_err(format!(
            "DLPack dtype (code {}, {} bits, {} lanes) is not a plain element type",
            dt.code, dt.bits, dt.lanes
        )));
    }
    let kind = match dt.code {
        0 => b'i',
        1 => b'u',
        2 => b'f',
        4 => b'B',
        5 => b'c',
        6 => b'b',
        c => {
            return Err(PyValueError::new_err(format!(
                "DLPack dtype code {c} is not supported"
            )))
        }
    };
    Ok((kind, dt.bits as usize / 8))
}

/// The DLPack code of a numpy kind, for export.
fn code_of(kind: u8) -> Option<u8> {
    Some(match kind {
        b'i' => 0,
        b'u' => 1,
        b'f' => 2,
        b'c' => 5,
        b'b' => 6,
        _ => return None,
    })
}

/// One exported tensor: the DLPack struct, its shape and strides, and what keeps the memory
/// alive (`owner`), freed together by the deleter.
struct Export<M, O> {
    managed: M,
    shape: Vec<i64>,
    strides: Vec<i64>,
    _owner: O,
}

unsafe extern "C" fn delete_legacy<O>(p: *mut DLManagedTensor) {
    if !p.is_null() {
        // SAFETY: made by export() from a Box<Export<DLManagedTensor, O>>, whose first field
        // is `managed` (repr(C) not needed: manager_ctx holds the box's own address).
        unsafe {
            drop(Box::from_raw(
                (*p).manager_ctx as *mut Export<DLManagedTensor, O>,
            ))
        };
    }
}

unsafe extern "C" fn delete_versioned<O>(p: *mut DLManagedTensorVersioned) {
    if !p.is_null() {
        // SAFETY: as in delete_legacy.
        unsafe {
            drop(Box::from_raw(
                (*p).manager_ctx as *mut Export<DLManagedTensorVersioned, O>,
            ))
        };
    }
}

/// The capsule destructor the DLPack Python specification asks of producers: runs the deleter
/// unless a consumer renamed the capsule (took ownership).
unsafe extern "C" fn capsule_destructor(cap: *mut ffi::PyObject) {
    // SAFETY: called by Python with the GIL held on our capsule. The error indicator is saved
    // and restored around the calls, as the specification's reference destructor does.
    unsafe {
        let legacy = ffi::PyCapsule_IsValid(cap, LEGACY.as_ptr()) == 1;
        let versioned = ffi::PyCapsule_IsValid(cap, VERSIONED.as_ptr()) == 1;
        if !legacy && !versioned {
            return; // consumed ("used_dltensor"): the consumer calls the deleter
        }
        let mut ty = std::ptr::null_mut();
        let mut value = std::ptr::null_mut();
        let mut tb = std::ptr::null_mut();
        ffi::PyErr_Fetch(&mut ty, &mut value, &mut tb);
        if legacy {
            let p = ffi::PyCapsule_GetPointer(cap, LEGACY.as_ptr()) as *mut DLManagedTensor;
            if let Some(d) = p.as_ref().and_then(|m| m.deleter) {
                d(p);
            }
        } else {
            let p =
                ffi::PyCapsule_GetPointer(cap, VERSIONED.as_ptr()) as *mut DLManagedTensorVersioned;
            if let Some(d) = p.as_ref().and_then(|m| m.deleter) {
                d(p);
            }
        }
        ffi::PyErr_Restore(ty, value, tb);
    }
}

/// A DLPack capsule over `shape` elements of numpy kind `kind` and `itemsize` bytes at host
/// address `ptr`, kept valid by `owner` until the consumer's deleter (or the capsule's
/// destructor) runs. Versioned (DLPack 1.0) when `versioned`.
pub(crate) fn export<O: Send + 'static>(
    py: Python<'_>,
    ptr: usize,
    kind: u8,
    itemsize: usize,
    shape: Vec<i64>,
    owner: O,
    versioned: bool,
) -> PyResult<Py<PyAny>> {
    let code = code_of(kind).ok_or_else(|| {
        PyBufferError::new_err(
            "a column of raw bytes or records has no DLPack type: use numpy() instead",
        )
    })?;
    let bits = u8::try_from(itemsize * 8)
        .map_err(|_| PyBufferError::new_err("elements wider than 31 bytes have no DLPack type"))?;
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1].max(1);
    }
    let tensor = DLTensor {
        data: ptr as *mut c_void,
        device: DLDevice {
            device_type: DL_CPU,
            device_id: 0,
        },
        ndim: shape.len() as i32,
        dtype: DLDataType {
            code,
            bits,
            lanes: 1,
        },
        shape: std::ptr::null_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    let (raw, name): (*mut c_void, &CStr) = if versioned {
        let mut b = Box::new(Export {
            managed: DLManagedTensorVersioned {
                version: DLPackVersion { major: 1, minor: 0 },
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(delete_versioned::<O>),
                flags: 0,
                dl_tensor: tensor,
            },
            shape,
            strides,
            _owner: owner,
        });
        b.managed.dl_tensor.shape = b.shape.as_mut_ptr();
        b.managed.dl_tensor.strides = b.strides.as_mut_ptr();
        let ctx = &mut *b as *mut Export<DLManagedTensorVersioned, O>;
        b.managed.manager_ctx = ctx.cast();
        let raw = Box::into_raw(b);
        // SAFETY: raw is the box just leaked; managed is a field of it.
        (
            unsafe { &mut (*raw).managed as *mut DLManagedTensorVersioned }.cast(),
            VERSIONED,
        )
    } else {
        let mut b = Box::new(Export {
            managed: DLManagedTensor {
                dl_tensor: tensor,
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(delete_legacy::<O>),
            },
            shape,
            strides,
            _owner: owner,
        });
        b.managed.dl_tensor.shape = b.shape.as_mut_ptr();
        b.managed.dl_tensor.strides = b.strides.as_mut_ptr();
        let ctx = &mut *b as *mut Export<DLManagedTensor, O>;
        b.managed.manager_ctx = ctx.cast();
        let raw = Box::into_raw(b);
        // SAFETY: as above.
        (
            unsafe { &mut (*raw).managed as *mut DLManagedTensor }.cast(),
            LEGACY,
        )
    };
    // SAFETY: raw points to a live managed tensor; the name is a static C string; the
    // destructor runs the deleter unless a consumer takes ownership.
    let cap = unsafe { ffi::PyCapsule_New(raw, name.as_ptr(), Some(capsule_destructor)) };
    if cap.is_null() {
        // SAFETY: the capsule was not made, so we still own the export: free it.
        unsafe {
            if versioned {
                delete_versioned::<O>(raw.cast());
            } else {
                delete_legacy::<O>(raw.cast());
            }
        }
        return Err(PyErr::fetch(py));
    }
    // SAFETY: PyCapsule_New returned a new reference.
    Ok(unsafe { Bound::from_owned_ptr(py, cap) }.unbind())
}
