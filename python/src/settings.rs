//! The settings every readback class takes from Python (capacity, slots, device, transport,
//! staged copy), checked before any driver call, and their Python names.
use crate::errors::make;
use pyo3::prelude::*;
use srb::{StagedCopy, Transport};

/// Checks the settings every readback kind shares, before any driver call.
pub(crate) fn check_settings(
    capacity: i64,
    slots: i64,
    device: i64,
    transport: &str,
) -> PyResult<(usize, usize, i32, Transport)> {
    let capacity = check_capacity(capacity)?;
    if slots < 1 {
        return Err(config_error(format!(
            "slots must be at least 1, not {slots}"
        )));
    }
    let device = check_device(device)?;
    let transport = match transport {
        "mapped" => Transport::Mapped,
        "staged" => Transport::Staged,
        t => {
            return Err(config_error(format!(
                "transport must be \"mapped\" or \"staged\" (or \"auto\" for a Readback), not {t:?}"
            )))
        }
    };
    Ok((capacity, slots as usize, device, transport))
}

/// A CUDA device ordinal, from Python: 0 or more (readbacks and sized launches).
pub(crate) fn check_device(device: i64) -> PyResult<i32> {
    i32::try_from(device)
        .ok()
        .filter(|d| *d >= 0)
        .ok_or_else(|| {
            config_error(format!(
                "device must be a CUDA device ordinal (0, 1, ...), not {device}"
            ))
        })
}

/// A sized launch's size classes (`n_max` each), from Python: each at least 1; whether they
/// ascend to the capacity is the core's check.
pub(crate) fn check_classes(classes: &[IntSetting]) -> PyResult<Vec<u64>> {
    classes
        .iter()
        .map(|c| match c.0 {
            n if n >= 1 => Ok(n as u64),
            n => Err(config_error(format!(
                "every size class must be at least 1 row, not {n}"
            ))),
        })
        .collect()
}

/// A sized launch's exact-grid form from Python: items per block, at least 1, and no classes
/// beside it (the form has one class, the capacity).
pub(crate) fn check_items_per_block(
    items_per_block: Option<i64>,
    classes_given: bool,
) -> PyResult<Option<u64>> {
    match items_per_block {
        None => Ok(None),
        Some(_) if classes_given => Err(config_error(
            "items_per_block (the exact-grid form) has one class, the capacity: give no classes"
                .to_string(),
        )),
        Some(n) if n < 1 => Err(config_error(format!(
            "items_per_block must be at least 1, not {n}"
        ))),
        Some(n) => Ok(Some(n as u64)),
    }
}

/// The staged transport's copy from its Python name: `"auto"`, `"whole"` or `"sized"`.
pub(crate) fn check_staged_copy(copy: &str) -> PyResult<StagedCopy> {
    match copy {
        "auto" => Ok(StagedCopy::Auto),
        "whole" => Ok(StagedCopy::Whole),
        "sized" => Ok(StagedCopy::Sized),
        c => Err(config_error(format!(
            "staged_copy must be \"auto\", \"whole\" or \"sized\", not {c:?}"
        ))),
    }
}

/// A capacity in rows, from Python: at least 1 (readbacks and their `grow`).
pub(crate) fn check_capacity(capacity: i64) -> PyResult<usize> {
    if capacity < 1 {
        return Err(config_error(format!(
            "capacity must be at least 1 row, not {capacity}"
        )));
    }
    Ok(capacity as usize)
}

/// An append readback's spill rows, from Python: none, or 0 or more.
pub(crate) fn check_spill(spill: Option<i64>) -> PyResult<Option<i64>> {
    match spill {
        Some(s) if s < 0 => Err(config_error(format!(
            "spill must be 0 or more rows, not {s}"
        ))),
        s => Ok(s),
    }
}

fn config_error(msg: String) -> PyErr {
    Python::attach(|py| make(py, "ConfigError", msg, &[]))
}

/// A transport's Python name.
pub(crate) fn transport_name(t: Transport) -> &'static str {
    match t {
        Transport::Mapped => "mapped",
        Transport::Staged => "staged",
        Transport::Auto => "auto",
    }
}

/// The copy in use, as `info["staged_copy"]` gives it: `"whole"`, `"sized"`, or `None`
/// (mapped: nothing is copied).
pub(crate) fn staged_copy_name(c: Option<StagedCopy>) -> Option<&'static str> {
    match c? {
        StagedCopy::Sized => Some("sized"),
        _ => Some("whole"),
    }
}

/// An integer setting (capacity, slots, device, spill) as Python passes it: any int. One past
/// the range of `i64` is a `ConfigError` that gives the caller's number (pyo3 adds a note naming
/// the argument); an `OverflowError` from the conversion would name no rule. Not an int, or a
/// bool: `TypeError`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IntSetting(pub(crate) i64);

impl<'a, 'py> FromPyObject<'a, 'py> for IntSetting {
    type Error = PyErr;

    fn extract(obj: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        // A bool is an int to Python, but `Readback(True)` is a mistake, not one row.
        if obj.is_instance_of::<pyo3::types::PyBool>() {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "expected an int, not a bool",
            ));
        }
        match obj.extract::<i64>() {
            Ok(v) => Ok(IntSetting(v)),
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(obj.py()) => {
                Err(config_error(format!(
                    "{} is past the range of a 64-bit integer setting",
                    obj.repr()?
                )))
            }
            Err(e) => Err(e),
        }
    }
}
