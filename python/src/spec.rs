//! Column declarations: a numpy dtype per column (a subarray dtype such as `("f8", 3)` for
//! rows of 3 values), parsed once at construction, and the checks of each enqueued array
//! against its column.
use crate::array::DeviceArray;
use crate::errors::make;
use crate::py_util::{numpy, owner_of, Owner};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

/// Most dimensions of one row (numpy allows 32 in all before 2.0, the row index included).
pub(crate) const MAX_ROW_DIMS: usize = 31;

/// One column: its numpy dtype and what the slot and the checks need of it.
#[derive(Debug)]
pub(crate) struct ColSpec {
    /// The column's name (`columns={"pos": ...}`), if named.
    pub(crate) name: Option<String>,
    /// The dtype of one row as given (possibly a subarray dtype).
    pub(crate) dtype: Py<PyAny>,
    /// The dtype of one element (`dtype.base`).
    pub(crate) base: Py<PyAny>,
    /// numpy kind of the element: `b i u f c V`.
    pub(crate) kind: u8,
    /// Bytes per element.
    pub(crate) base_size: usize,
    /// Elements per row, as a shape (empty: one).
    pub(crate) row_shape: Vec<usize>,
    /// Bytes per row: what one slot row of this column holds.
    pub(crate) elem_size: usize,
    /// `base.str`, for `__array_interface__`.
    pub(crate) typestr: String,
    /// `base.descr` for structured dtypes, for `__array_interface__`.
    pub(crate) descr: Option<Py<PyAny>>,
}

impl ColSpec {
    fn parse(py: Python<'_>, spec: &Bound<'_, PyAny>, name: Option<String>) -> PyResult<Self> {
        let torch_name;
        let spec = if owner_of(spec) == Owner::Torch {
            // A torch.dtype: its numpy namesake (torch.float64 -> "float64").
            let s = spec.str()?.to_string();
            torch_name = match s.strip_prefix("torch.") {
                Some("bfloat16") => torch_bfloat16(py)?,
                Some(n) => n.into_pyobject(py)?.into_any(),
                None => spec.clone(),
            };
            &torch_name
        } else {
            spec
        };
        let d = numpy(py)?.getattr("dtype")?.call1((spec,)).map_err(|e| {
            PyTypeError::new_err(format!(
                "column {}: {} is not a numpy dtype ({e})",
                name.as_deref().unwrap_or("dtype"),
                spec.repr().map(|r| r.to_string()).unwrap_or_default()
            ))
        })?;
        let base = d.getattr("base")?;
        let row_shape: Vec<usize> = d.getattr("shape")?.extract()?;
        let kind: String = base.getattr("kind")?.extract()?;
        let base_size: usize = base.getattr("itemsize")?.extract()?;
        let typestr: String = base.getattr("str")?.extract()?;
        let structured = !base.getattr("fields")?.is_none();
        let what = || {
            d.repr()
                .map(|r| r.to_string())
                .unwrap_or_else(|_| "?".into())
        };
        // numpy's own flag: any field, at any depth, of kind O. The slot holds bytes copied
        // from the device, and a view that read them as object references would dereference
        // whatever addresses they happen to hold.
        if d.getattr("hasobject")?.extract::<bool>()? {
            return Err(config(
                py,
                format!(
                    "column dtype {} holds Python objects: a slot holds device bytes, never \
                     object references",
                    what()
                ),
            ));
        }
        let kind = match kind.as_str() {
            "b" | "i" | "u" | "f" | "c" | "V" => kind.as_bytes()[0],
            _ => {
                return Err(config(
                    py,
                    format!(
                        "column dtype {} is not a number, bool or plain-bytes type",
                        what()
                    ),
                ))
            }
        };
        if typestr.starts_with('>') {
            return Err(config(
                py,
                format!(
                    "column dtype {} is big-endian: CUDA devices are little-endian",
                    what()
                ),
            ));
        }
        let elem_size = base_size * row_shape.iter().product::<usize>();
        if elem_size == 0 {
            return Err(config(
                py,
                format!("column dtype {} has rows of 0 bytes", what()),
            ));
        }
        let descr = if structured {
            Some(base.getattr("descr")?.unbind())
        } else {
            None
        };
        Ok(ColSpec {
            name,
            dtype: d.clone().unbind(),
            base: base.unbind(),
            kind,
            base_size,
            row_shape,
            elem_size,
            typestr,
            descr,
        })
    }

    /// What the column is called in messages.
    pub(crate) fn label(&self, index: usize) -> String {
        match &self.name {
            Some(n) => format!("column {n:?}"),
            None => format!("column {index}"),
        }
    }

    /// Rows of `a` if it fits this column (element type and row shape; contiguity was checked
    /// when it was read), else a `ValueError` naming `what`.
    pub(crate) fn rows_of(&self, py: Python<'_>, a: &DeviceArray, what: &str) -> PyResult<usize> {
        if a.shape.is_empty() {
            return Err(PyValueError::new_err(format!(
                "{what} is 0-dimensional: it needs one row per element along its first axis"
            )));
        }
        let rows = a.shape[0] as usize;
        let rest = &a.shape[1..];
        let fits = if self.kind == b'V' {
            // Raw bytes: any element type, as long as a row has the column's bytes.
            // Checked: the shape passed check_shape, but a wrapped product must never match.
            rest.iter()
                .try_fold(a.itemsize as u64, |n, &x| {
                    u64::try_from(x).ok().and_then(|x| n.checked_mul(x))
                })
                .is_some_and(|b| b == self.elem_size as u64)
        } else {
            a.kind == self.kind
                && a.itemsize == self.base_size
                && rest.len() == self.row_shape.len()
                && rest
                    .iter()
                    .zip(&self.row_shape)
                    .all(|(&x, &y)| x as usize == y)
        };
        if !fits {
            return Err(PyValueError::new_err(format!(
                "{what} holds {} with rows of shape {:?}, but the readback's column holds {} \
                 with rows of shape {:?}",
                a.type_name(),
                rest,
                self.dtype
                    .bind(py)
                    .getattr("base")
                    .and_then(|b| b.str().map(|s| s.to_string()))
                    .unwrap_or_else(|_| self.typestr.clone()),
                self.row_shape
            )));
        }
        Ok(rows)
    }
}

/// The columns of a readback from `dtype=` or `columns=`; `true` when given as columns (the
/// readback then takes and returns tuples).
pub(crate) fn parse_columns(
    py: Python<'_>,
    dtype: Option<&Bound<'_, PyAny>>,
    columns: Option<&Bound<'_, PyAny>>,
) -> PyResult<(Vec<ColSpec>, bool)> {
    match (dtype, columns) {
        (Some(_), Some(_)) => Err(PyTypeError::new_err(
            "give either dtype= (one column) or columns= (several), not both",
        )),
        (None, None) => Ok((
            vec![ColSpec::parse(py, &numpy(py)?.getattr("float64")?, None)?],
            false,
        )),
        (Some(d), None) => Ok((vec![ColSpec::parse(py, d, None)?], false)),
        (None, Some(c)) => {
            let mut specs = Vec::new();
            if let Ok(dict) = c.cast::<PyDict>() {
                for (k, v) in dict.iter() {
                    let name: String = k.extract().map_err(|_| {
                        PyTypeError::new_err("columns= as a dict maps str names to dtypes")
                    })?;
                    specs.push(ColSpec::parse(py, &v, Some(name))?);
                }
            } else if c.is_instance_of::<PyList>() || c.is_instance_of::<PyTuple>() {
                for v in c.try_iter()? {
                    specs.push(ColSpec::parse(py, &v?, None)?);
                }
            } else {
                return Err(PyTypeError::new_err(
                    "columns= is a list (or tuple) of dtypes, or a dict of names to dtypes",
                ));
            }
            if specs.is_empty() || specs.len() > srb::MAX_COLUMNS {
                return Err(config(
                    py,
                    format!(
                        "a readback has 1 to {} columns, not {}",
                        srb::MAX_COLUMNS,
                        specs.len()
                    ),
                ));
            }
            Ok((specs, true))
        }
    }
}

/// numpy's dtype for torch.bfloat16: `ml_dtypes.bfloat16` where installed (JAX brings it),
/// else 2 raw bytes.
fn torch_bfloat16(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    match py.import("ml_dtypes") {
        Ok(m) => m.getattr("bfloat16"),
        Err(_) => Ok("V2".into_pyobject(py)?.into_any()),
    }
}

fn config(py: Python<'_>, msg: String) -> PyErr {
    make(py, "ConfigError", msg, &[])
}

/// The columns as a readback's `repr` shows them: `dtype=...` or `columns=[...]`/`{...}`.
pub(crate) fn describe_columns(py: Python<'_>, specs: &[ColSpec], columns: bool) -> String {
    let dt = |s: &ColSpec| {
        s.dtype
            .bind(py)
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_default()
    };
    if !columns {
        return format!("dtype={}", dt(&specs[0]));
    }
    let parts: Vec<String> = specs
        .iter()
        .map(|s| match &s.name {
            Some(n) => format!("{n:?}: {}", dt(s)),
            None => dt(s),
        })
        .collect();
    if specs.iter().any(|s| s.name.is_some()) {
        format!("columns={{{}}}", parts.join(", "))
    } else {
        format!("columns=[{}]", parts.join(", "))
    }
}
