//! An overflowed append's spilled rows: `srb_fetch_spill` brings them back,
//! `srb_spill_data` and `srb_spill_bucket_data` read them.
use crate::args::{stream_of, timeout};
use crate::boundary::{guard, guard_ptr, invalid, lock, Failure};
use crate::codes::SRB_OK;
use crate::handle::{handle, held_of, srb_readback, Inner};
use crate::held::Held;
use crate::types::CUstream_st;
use srb::ColumnTicket;
use std::ffi::c_void;
use std::sync::Arc;

/// After `SRB_ERR_APPEND_OVERFLOW` for readback (or held replay) `seq`: brings back the rows
/// that went to the device-side spill region, on `stream`, waiting at most `timeout_ns`
/// (< 0: no limit), and stores their number in `*count_out`. Then `srb_spill_data` gives
/// each column's spilled rows, valid until `srb_release(rb, seq)`. A second call for the same
/// `seq` fetches nothing: it waits for the first fetch and gives its count again.
///
/// # Safety
/// `rb` is a live handle; `stream` a live stream of its context; `count_out` writable.
#[no_mangle]
pub unsafe extern "C" fn srb_fetch_spill(
    rb: *const srb_readback,
    seq: u64,
    stream: *mut CUstream_st,
    timeout_ns: i64,
    count_out: *mut u64,
) -> i32 {
    guard(|| {
        if count_out.is_null() {
            return Err(invalid("count_out is null"));
        }
        // SAFETY: per the contract.
        let h = unsafe { handle(rb)? };
        if let Inner::Host { .. } | Inner::Buckets { .. } = h.inner {
            return Err(invalid("srb_fetch_spill needs an append readback"));
        }
        let held = held_of(h, seq)?;
        let Some(spill) = held.spill() else {
            return Err(invalid("srb_fetch_spill needs an append readback"));
        };
        let fetched = {
            // Locked from the check to the store, so that a seq's rows are fetched once, also
            // by threads calling at the same time: a second fetch would free the rows that
            // pointers from `srb_spill_data` still address. The fetch only enqueues; the wait
            // below runs unlocked.
            let mut stored = lock(spill);
            match &*stored {
                Some(t) => Some(t.clone()),
                None => {
                    let stream = stream_of(stream);
                    let fetched = match &*held {
                        // SAFETY: a live stream, per the contract; checked to be of the context.
                        Held::Replay(_, r) => unsafe { r.fetch_spill_raw_stream(stream)? },
                        // SAFETY: as above.
                        Held::Append(t, _) => unsafe { t.fetch_spill_raw_stream(stream)? },
                        Held::Pack(_) => {
                            return Err(invalid("srb_fetch_spill needs an append readback"))
                        }
                    };
                    let fetched = fetched.map(Arc::new);
                    stored.clone_from(&fetched);
                    fetched
                }
            }
        };
        let n = match &fetched {
            None => 0,
            Some(t) => wait_spill(t, timeout_ns)?,
        };
        // SAFETY: per the contract.
        unsafe { *count_out = n as u64 };
        Ok(SRB_OK)
    })
}

/// Waits for a fetched spill (at most `timeout_ns`; < 0: no limit) and gives its row count.
fn wait_spill(t: &ColumnTicket, timeout_ns: i64) -> Result<usize, Failure> {
    Ok(match timeout(timeout_ns) {
        None => t.wait()?.count(),
        Some(d) => t.wait_timeout(d)?.count(),
    })
}

/// Column `column` of the spilled rows that `srb_fetch_spill` brought back for `seq` (of every
/// bucket: bucketed readbacks read them with `srb_spill_bucket_data`), valid until
/// `srb_release(rb, seq)`; null if none were fetched.
///
/// # Safety
/// `rb` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn srb_spill_data(
    rb: *const srb_readback,
    seq: u64,
    column: u32,
) -> *const c_void {
    guard_ptr(|| {
        // SAFETY: per the contract.
        let t = unsafe { fetched_spill(rb, seq)? };
        let out = t.wait()?;
        Ok(out.column_bytes(column as usize)?.as_ptr().cast())
    })
}

/// Bucketed append: column `column`'s spilled rows of bucket `bucket` that `srb_fetch_spill`
/// brought back for `seq`, their number in `*count_out` (may be null); valid until
/// `srb_release(rb, seq)`; null if none were fetched.
///
/// # Safety
/// `rb` is a live handle; `count_out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn srb_spill_bucket_data(
    rb: *const srb_readback,
    seq: u64,
    bucket: u32,
    column: u32,
    count_out: *mut u64,
) -> *const c_void {
    guard_ptr(|| {
        // SAFETY: per the contract.
        let t = unsafe { fetched_spill(rb, seq)? };
        let out = t.wait()?;
        let n = out
            .bucket_count(bucket as usize)
            .ok_or_else(|| invalid(format!("bucket {bucket} does not exist")))?;
        let p = out
            .bucket_column_bytes(column as usize, bucket as usize)?
            .as_ptr();
        if !count_out.is_null() {
            // SAFETY: per the contract.
            unsafe { *count_out = n as u64 };
        }
        Ok(p.cast())
    })
}

/// The spill that `srb_fetch_spill` brought back for `seq` (a held replay's, or a held
/// append readback's).
///
/// # Safety
/// `rb` is null or a live handle.
unsafe fn fetched_spill(rb: *const srb_readback, seq: u64) -> Result<Arc<ColumnTicket>, Failure> {
    // SAFETY: per the contract.
    let h = unsafe { handle(rb)? };
    let held = held_of(h, seq)?;
    let ticket = held.spill().and_then(|spill| lock(spill).clone());
    ticket.ok_or_else(|| invalid(format!("no spill of {seq} was fetched")))
}
