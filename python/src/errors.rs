//! The core's errors as Python exceptions, with their facts as attributes. The classes are
//! defined in `sized_readback/_errors.py` (each also a subclass of the matching builtin:
//! `OverflowError`, `ValueError`, `TimeoutError`, `RuntimeError`).
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyModule};
use srb::Error;

fn module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    Ok(ERRORS
        .get_or_try_init(py, || {
            py.import("sized_readback._errors").map(Bound::unbind)
        })?
        .bind(py))
}

/// An instance of the package's exception `class` with `message` and the attributes `facts`.
pub(crate) fn make(
    py: Python<'_>,
    class: &str,
    message: String,
    facts: &[(&str, Bound<'_, PyAny>)],
) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let kwargs = PyDict::new(py);
        for (k, v) in facts {
            kwargs.set_item(k, v)?;
        }
        let e = module(py)?
            .getattr(class)?
            .call((message.clone(),), Some(&kwargs))?;
        Ok(PyErr::from_value(e))
    };
    build().unwrap_or_else(|e| {
        PyRuntimeError::new_err(format!("{message} (and raising {class} failed: {e})"))
    })
}

/// The Python exception for a core error.
pub(crate) fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let msg = e.to_string();
    macro_rules! facts {
        ($($k:literal => $v:expr),* $(,)?) => {
            &[$(($k, $v.into_pyobject(py).map(|o| o.into_any()).unwrap_or_else(|_| py.None().into_bound(py)))),*]
        };
    }
    match e {
        Error::DriverNotFound => make(py, "DriverNotFoundError", msg, &[]),
        Error::NoDevice { ordinal, available } => make(
            py,
            "NoDeviceError",
            msg,
            facts!["ordinal" => ordinal, "available" => available],
        ),
        Error::UnsupportedDevice { major, minor } => make(
            py,
            "UnsupportedDeviceError",
            msg,
            facts!["major" => major, "minor" => minor],
        ),
        Error::Cuda { call, source } => make(
            py,
            "CudaError",
            msg,
            facts!["call" => call, "code" => source.0 as i32, "name" => format!("{:?}", source.0)],
        ),
        Error::InvalidConfig { .. } => make(py, "ConfigError", msg, &[]),
        Error::SchemaMismatch { .. } => make(py, "SchemaError", msg, &[]),
        Error::StreamCapturing => make(py, "StreamCapturingError", msg, &[]),
        Error::NothingRecorded => make(py, "NothingRecordedError", msg, &[]),
        Error::RecordingMismatch { .. } => make(py, "RecordingMismatchError", msg, &[]),
        Error::CountExceedsCapacity { count, capacity } => make(
            py,
            "CountExceedsCapacityError",
            msg,
            facts!["count" => count, "capacity" => capacity],
        ),
        Error::NegativeCount { count } => {
            make(py, "NegativeCountError", msg, facts!["count" => count])
        }
        Error::CountExceedsSource {
            count,
            column,
            source_len,
        } => make(
            py,
            "CountExceedsSourceError",
            msg,
            facts!["count" => count, "column" => column, "source_len" => source_len],
        ),
        Error::AppendOverflow {
            count,
            capacity,
            spilled,
            dropped,
        } => make(
            py,
            "AppendOverflowError",
            msg,
            facts![
                "count" => count,
                "capacity" => capacity,
                "spilled" => spilled,
                "dropped" => dropped,
            ],
        ),
        Error::AppendUnfinished { seq } => {
            make(py, "AppendUnfinishedError", msg, facts!["seq" => seq])
        }
        Error::AppendMisuse { .. } => make(py, "AppendMisuseError", msg, &[]),
        Error::BucketOverCapacity {
            count, capacity, ..
        } => make(
            py,
            "CountExceedsCapacityError",
            msg,
            facts!["count" => count, "capacity" => capacity],
        ),
        Error::ForeignContext { what } => {
            make(py, "ForeignDeviceError", msg, facts!["what" => what])
        }
        Error::BufferTooShort { what, len, need } => make(
            py,
            "BufferTooShortError",
            msg,
            facts!["what" => what, "len" => len, "need" => need],
        ),
        Error::BadPointer { what, addr, align } => make(
            py,
            "BadPointerError",
            msg,
            facts!["what" => what, "address" => addr, "alignment" => align],
        ),
        Error::SlotsExhausted { slots } => make(
            py,
            "SlotsExhaustedError",
            format!(
                "{msg}; from Python, a slot is held by a pending ticket, a readout not yet \
                 released, and any numpy view or DLPack export of one"
            ),
            facts!["slots" => slots],
        ),
        Error::Timeout { waited } => make(
            py,
            "ReadbackTimeoutError",
            msg,
            facts!["waited" => waited.as_secs_f64()],
        ),
        Error::Overrun { seq } => make(py, "OverrunError", msg, facts!["seq" => seq]),
        Error::CorruptTrailer { .. } => make(py, "CorruptTrailerError", msg, &[]),
        Error::UnknownCountKind { kind } => {
            make(py, "UnknownCountKindError", msg, facts!["kind" => kind])
        }
        Error::SizedCopyUnavailable { .. } => make(py, "SizedCopyUnavailableError", msg, &[]),
        Error::SizedLaunchUnavailable { .. } => make(py, "SizedLaunchUnavailableError", msg, &[]),
        Error::BodyRecording { class, n_max, .. } => make(
            py,
            "BodyRecordingError",
            msg,
            facts!["index" => class, "n_max" => n_max],
        ),
        _ => make(py, "ReadbackError", msg, &[]),
    }
}

/// `Result<T, srb::Error>` to `PyResult<T>`.
pub(crate) trait IntoPy<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for Result<T, Error> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}
