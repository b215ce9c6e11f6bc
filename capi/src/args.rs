//! C arguments as Rust values: timeouts, driver handles, column arrays. (The readback handle
//! is `handle::handle`.)
use crate::boundary::{invalid, Failure};
use crate::types::{srb_devptr, CUevent_st, CUstream_st};
use srb::cudarc::driver::sys;
use srb::{ColumnSource, MAX_COLUMNS};
use std::time::Duration;

/// `timeout_ns` as a duration; `None` (no limit) when negative. A timeout past what the clock
/// can hold is no limit either (the library's waits treat it so).
pub(crate) fn timeout(timeout_ns: i64) -> Option<Duration> {
    u64::try_from(timeout_ns).ok().map(Duration::from_nanos)
}

/// The driver's stream handle.
pub(crate) fn stream_of(s: *mut CUstream_st) -> sys::CUstream {
    s.cast()
}

/// The driver's event handle; `None` for null.
pub(crate) fn event_of(e: *mut CUevent_st) -> Option<sys::CUevent> {
    (!e.is_null()).then_some(e.cast())
}

/// The first `n` (at most [`MAX_COLUMNS`]) columns and lengths, without allocating.
pub(crate) struct Sources {
    cols: [ColumnSource; MAX_COLUMNS],
    n: usize,
}

impl Sources {
    pub(crate) fn as_slice(&self) -> &[ColumnSource] {
        &self.cols[..self.n]
    }
}

/// The column arrays of an enqueue or a recording, `n` of each.
///
/// # Safety
/// `columns` and `lens` are null or point to `n` readable values.
pub(crate) unsafe fn sources(
    columns: *const srb_devptr,
    lens: *const usize,
    n: usize,
) -> Result<Sources, Failure> {
    if columns.is_null() || lens.is_null() {
        return Err(invalid("the column or length array is null"));
    }
    let n = n.min(MAX_COLUMNS);
    // SAFETY: per the contract.
    let (ptrs, lens) = unsafe {
        (
            std::slice::from_raw_parts(columns, n),
            std::slice::from_raw_parts(lens, n),
        )
    };
    let mut cols = [ColumnSource::default(); MAX_COLUMNS];
    for (c, (&ptr, &len)) in cols.iter_mut().zip(ptrs.iter().zip(lens)) {
        *c = ColumnSource { ptr, len };
    }
    Ok(Sources { cols, n })
}
