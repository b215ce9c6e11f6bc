//! Zero-copy numpy views of slot memory through numpy's C API (`PyArray_NewFromDescr`), taken
//! from the `_ARRAY_API` capsule at run time as numpy's own `import_array()` does: no numpy
//! headers or build dependency, and one call per view instead of a Python-level
//! `numpy.asarray` over an `__array_interface__` dict that numpy would parse again.
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use std::ffi::{c_int, c_void};

/// Indices into numpy's C API table, the same in numpy 1.x and 2.x
/// (`numpy/__multiarray_api.h`).
const API_ARRAY_TYPE: usize = 2;
const API_NEW_FROM_DESCR: usize = 94;
const API_SET_BASE_OBJECT: usize = 282;

/// `NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED`, without `NPY_ARRAY_WRITEABLE`: read-only.
const READ_ONLY_C: c_int = 0x0001 | 0x0100;

type NewFromDescr = unsafe extern "C" fn(
    *mut ffi::PyTypeObject,
    *mut ffi::PyObject,
    c_int,
    *const isize,
    *const isize,
    *mut c_void,
    c_int,
    *mut ffi::PyObject,
) -> *mut ffi::PyObject;
type SetBaseObject = unsafe extern "C" fn(*mut ffi::PyObject, *mut ffi::PyObject) -> c_int;

struct Api {
    array_type: *mut ffi::PyTypeObject,
    new_from_descr: NewFromDescr,
    set_base: SetBaseObject,
    /// Keeps the module, and so the table, alive.
    _module: Py<PyAny>,
}

// SAFETY: the pointers address numpy's static C API table and type, immutable and valid for
// as long as the module (held) is loaded; they are used only with the GIL held.
unsafe impl Send for Api {}
// SAFETY: as above.
unsafe impl Sync for Api {}

/// numpy's C API, or None when it cannot be had (then views go through `numpy.asarray`).
fn api(py: Python<'_>) -> Option<&'static Api> {
    static API: PyOnceLock<Option<Api>> = PyOnceLock::new();
    API.get_or_init(py, || load(py).ok()).as_ref()
}

fn load(py: Python<'_>) -> PyResult<Api> {
    let m = py
        .import("numpy._core._multiarray_umath")
        .or_else(|_| py.import("numpy.core._multiarray_umath"))?;
    let cap = m.getattr("_ARRAY_API")?;
    // SAFETY: PyCapsule_IsValid accepts any object; with a null name it checks an unnamed
    // capsule, which is what numpy exports.
    if unsafe { ffi::PyCapsule_IsValid(cap.as_ptr(), std::ptr::null()) } != 1 {
        return Err(pyo3::exceptions::PyRuntimeError::new_err(
            "numpy's _ARRAY_API is not a capsule",
        ));
    }
    // SAFETY: a valid unnamed capsule (checked); numpy stores its `void **` API table there.
    let table = unsafe { ffi::PyCapsule_GetPointer(cap.as_ptr(), std::ptr::null()) }
        as *const *const c_void;
    if table.is_null() {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: the table has well over 282 entries in every numpy this supports (>= 1.21);
    // the entries read are the documented ones, with the signatures of the header.
    unsafe {
        let f = |i: usize| *table.add(i);
        let (t, n, b) = (
            f(API_ARRAY_TYPE),
            f(API_NEW_FROM_DESCR),
            f(API_SET_BASE_OBJECT),
        );
        if t.is_null() || n.is_null() || b.is_null() {
            return Err(pyo3::exceptions::PyRuntimeError::new_err(
                "numpy's C API table lacks an entry",
            ));
        }
        Ok(Api {
            array_type: t as *mut ffi::PyTypeObject,
            new_from_descr: std::mem::transmute::<*const c_void, NewFromDescr>(n),
            set_base: std::mem::transmute::<*const c_void, SetBaseObject>(b),
            _module: m.into_any().unbind(),
        })
    }
}

/// Whether views can be made through the C API (tests).
pub(crate) fn available(py: Python<'_>) -> bool {
    api(py).is_some()
}

/// A read-only, C-contiguous numpy array of `shape` elements of `descr` (a numpy dtype) at
/// `data`, whose base is `base` (what keeps the memory alive). `Ok(None)` when numpy's C API
/// is unavailable.
///
/// # Safety
/// `data` addresses at least `shape.product() * descr.itemsize` bytes, aligned for `descr`,
/// that stay valid and unwritten for as long as `base` lives.
pub(crate) unsafe fn view<'py>(
    py: Python<'py>,
    descr: &Bound<'py, PyAny>,
    shape: &[isize],
    data: *mut c_void,
    base: Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let Some(api) = api(py) else {
        return Ok(None);
    };
    // SAFETY: NewFromDescr steals a reference to the descriptor: give it one. The shape has
    // `shape.len()` entries; null strides mean C order; the memory per the contract.
    let arr = unsafe {
        ffi::Py_INCREF(descr.as_ptr());
        (api.new_from_descr)(
            api.array_type,
            descr.as_ptr(),
            shape.len() as c_int,
            shape.as_ptr(),
            std::ptr::null(),
            data,
            READ_ONLY_C,
            std::ptr::null_mut(),
        )
    };
    if arr.is_null() {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference to an array just made.
    let arr = unsafe { Bound::from_owned_ptr(py, arr) };
    // SAFETY: SetBaseObject steals the reference to the base (into_ptr gives it up), also
    // on failure; the array is a fresh ndarray with no base yet.
    if unsafe { (api.set_base)(arr.as_ptr(), base.into_ptr()) } != 0 {
        return Err(PyErr::fetch(py));
    }
    Ok(Some(arr))
}
