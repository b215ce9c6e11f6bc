//! `info`: one description ([`FIELDS`]) of what every readback class reports about its
//! settings and slot layout. It makes each class's `info` dict, and, exported to Python as
//! `INFO_FIELDS`, the deprecated shortcut getters (`rb.capacity` for `rb.info["capacity"]`)
//! that `sized_readback/_info.py` puts on the classes.
use crate::settings::{staged_copy_name, transport_name};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use pyo3::IntoPyObjectExt;
use srb::{ReadbackInfo, StagedCopy, WaitMode};

/// What `info` describes: the core's [`ReadbackInfo`], the device ordinal, and for a
/// `transport="auto"` readback what its staged slot set adds.
pub(crate) struct Facts {
    pub(crate) core: ReadbackInfo,
    pub(crate) device: i32,
    pub(crate) auto: Option<AutoFacts>,
}

/// `transport="auto"`: its staged slot set (the core's `Transport::Auto`).
pub(crate) struct AutoFacts {
    /// The staged set's copy; `None` while no staged slots are allocated.
    pub(crate) staged_copy: Option<StagedCopy>,
    /// Staged slots allocated (0 while the threshold is beyond the capacity).
    pub(crate) staged_slots: usize,
}

impl AutoFacts {
    /// What an auto readback's `info` says of its staged set: the core makes one, with as many
    /// slots as the mapped set, where a count within the capacity can reach it.
    pub(crate) fn of(core: &ReadbackInfo) -> Self {
        let made = core.auto_staged_from.is_some();
        AutoFacts {
            staged_copy: core.staged_copy.filter(|_| made),
            staged_slots: if made { core.slots } else { 0 },
        }
    }
}

const ALL: &[&str] = &["Readback", "GraphReadback", "AppendReadback"];
const NONE: &[&str] = &[];

/// One entry of `info`.
pub(crate) struct Field {
    pub(crate) name: &'static str,
    pub(crate) doc: &'static str,
    /// The classes that keep a deprecated getter of this name (those that had one before
    /// `info` described it).
    pub(crate) getter_on: &'static [&'static str],
    /// The value, or `None` where the entry does not apply (left out of the dict).
    get: fn(Python<'_>, &Facts) -> PyResult<Option<Py<PyAny>>>,
}

fn some<'py>(py: Python<'py>, v: impl IntoPyObject<'py>) -> PyResult<Option<Py<PyAny>>> {
    Ok(Some(v.into_py_any(py)?))
}

/// The entries of `info`, in the dict's order.
pub(crate) const FIELDS: &[Field] = &[
    Field {
        name: "capacity",
        doc: "Rows one slot holds.",
        getter_on: ALL,
        get: |py, f| some(py, f.core.capacity),
    },
    Field {
        name: "slots",
        doc: "Number of slots: readbacks in flight or held at once (per set for \
              transport=\"auto\", which has a set of each transport).",
        getter_on: ALL,
        get: |py, f| some(py, f.core.slots),
    },
    Field {
        name: "buckets",
        doc: "Buckets per slot (1 for every Python readback).",
        getter_on: NONE,
        get: |py, f| some(py, f.core.buckets),
    },
    Field {
        name: "spill_capacity",
        doc: "Rows of the device-side spill region per slot (append readbacks; else 0).",
        getter_on: &["AppendReadback"],
        get: |py, f| some(py, f.core.spill_capacity),
    },
    Field {
        name: "transport",
        doc: "\"mapped\", \"staged\" or \"auto\".",
        getter_on: &["Readback", "AppendReadback"],
        get: |py, f| match f.auto {
            Some(_) => some(py, "auto"),
            None => some(py, transport_name(f.core.transport)),
        },
    },
    Field {
        name: "staged_copy",
        doc: "The staged transport's copy in use: \"sized\" (what the count needs, picked on \
              the device; CUDA 12.8+ drivers), \"whole\" (the whole slot), or None (mapped; \
              under transport=\"auto\", the staged slots', None while none are allocated).",
        getter_on: &["Readback", "AppendReadback"],
        get: |py, f| match &f.auto {
            Some(a) => some(py, staged_copy_name(a.staged_copy)),
            None => some(py, staged_copy_name(f.core.staged_copy)),
        },
    },
    Field {
        name: "wait_mode",
        doc: "\"trailer\" (the host polls the slot's trailer) or \"event\".",
        getter_on: NONE,
        get: |py, f| match f.core.wait_mode {
            WaitMode::Event => some(py, "event"),
            _ => some(py, "trailer"),
        },
    },
    Field {
        name: "device",
        doc: "The CUDA device ordinal.",
        getter_on: ALL,
        get: |py, f| some(py, f.device),
    },
    Field {
        name: "slot_bytes",
        doc: "Bytes from one slot to the next.",
        getter_on: NONE,
        get: |py, f| some(py, f.core.layout.slot_stride()),
    },
    Field {
        name: "column_offsets",
        doc: "Where each column starts in a slot, in bytes.",
        getter_on: NONE,
        get: |py, f| some(py, f.core.layout.column_offsets().to_vec()),
    },
    Field {
        name: "trailer_offset",
        doc: "Where the slot's trailer starts, in bytes.",
        getter_on: NONE,
        get: |py, f| some(py, f.core.layout.trailer_offset()),
    },
    Field {
        name: "programmatic_launch",
        doc: "Whether the pack launches with programmatic dependent launch.",
        getter_on: NONE,
        get: |py, f| some(py, f.core.launch_shape.programmatic),
    },
    Field {
        name: "kernel_image",
        doc: "The embedded kernel image the context loaded, e.g. \"sm_90 (machine code, 46352 \
              bytes)\": what the device runs, recorded when the kernels were loaded.",
        getter_on: NONE,
        get: |py, f| some(py, f.core.kernel_image.to_string()),
    },
    Field {
        name: "auto_staged_slots",
        doc: "transport=\"auto\" only: the staged slots allocated (0 while the threshold is \
              beyond the capacity).",
        getter_on: NONE,
        get: |py, f| match &f.auto {
            Some(a) => some(py, a.staged_slots),
            None => Ok(None),
        },
    },
];

/// The `info` dict of `facts`.
pub(crate) fn dict<'py>(py: Python<'py>, facts: &Facts) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for f in FIELDS {
        if let Some(v) = (f.get)(py, facts)? {
            d.set_item(f.name, v)?;
        }
    }
    Ok(d)
}

/// `INFO_FIELDS`: `(name, doc, classes with a deprecated getter of that name)` per entry.
pub(crate) fn fields(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let rows = FIELDS
        .iter()
        .map(|f| (f.name, f.doc, PyTuple::new(py, f.getter_on)?).into_pyobject(py))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, rows)
}
