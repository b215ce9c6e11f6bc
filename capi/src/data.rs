//! A held readback's rows: `srb_count`, `srb_data`, `srb_bucket_data`.
use crate::boundary::{guard, guard_ptr, in_flight, invalid};
use crate::codes::{SRB_NOT_READY, SRB_OK};
use crate::handle::{handle, held_of, srb_readback};
use crate::held::Held;
use std::ffi::c_void;

/// The rows in the slot of complete readback `seq`: its count, or after an append overflow
/// the capacity (host mode: `SRB_NOT_READY` while in flight; graph mode: a replay held since
/// `srb_next`).
///
/// # Safety
/// `rb` is a live handle; `count_out` is writable.
#[no_mangle]
pub unsafe extern "C" fn srb_count(rb: *const srb_readback, seq: u64, count_out: *mut u64) -> i32 {
    guard(|| {
        if count_out.is_null() {
            return Err(invalid("count_out is null"));
        }
        // SAFETY: per the contract.
        let h = unsafe { handle(rb)? };
        let t = held_of(h, seq)?;
        let n = match t.data(0, 0)? {
            // The total over the buckets (each bucket's rows: srb_bucket_data).
            Some(_) => t.rows()?,
            None => return Ok(SRB_NOT_READY),
        };
        // SAFETY: per the contract.
        unsafe { *count_out = n as u64 };
        Ok(SRB_OK)
    })
}

/// Host address of column `column` of complete readback `seq` in pinned memory: its rows
/// (`srb_count` of them), 16-byte aligned, valid until `srb_release(rb, seq)`. Null if the
/// readback is not complete or held, or on an error (see `srb_last_error`). Bucketed readbacks
/// are read bucket by bucket with `srb_bucket_data`.
///
/// # Safety
/// `rb` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn srb_data(rb: *const srb_readback, seq: u64, column: u32) -> *const c_void {
    guard_ptr(|| {
        // SAFETY: per the contract.
        let h = unsafe { handle(rb)? };
        let t = held_of(h, seq)?;
        if column as usize >= h.columns() {
            return Err(invalid(format!("column {column} does not exist")));
        }
        let k = h.buckets();
        if k > 1 {
            return Err(invalid(format!(
                "the readback has {k} buckets: read each with srb_bucket_data"
            )));
        }
        let bytes_ptr = t.data(column as usize, 0)?.ok_or_else(|| in_flight(seq))?.0;
        Ok(bytes_ptr.cast())
    })
}

/// Host address of column `column`'s rows of bucket `bucket` of complete readback `seq`, and
/// their number in `*count_out` (may be null): valid until `srb_release(rb, seq)`. For a
/// readback without buckets, bucket 0 is all of it. After `SRB_ERR_APPEND_OVERFLOW` or
/// `SRB_ERR_BAD_BUCKET`, the rows that reached the bucket. Null (and `*count_out` untouched) if
/// the readback is not complete or held, or on an error.
///
/// # Safety
/// `rb` is a live handle; `count_out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn srb_bucket_data(
    rb: *const srb_readback,
    seq: u64,
    bucket: u32,
    column: u32,
    count_out: *mut u64,
) -> *const c_void {
    guard_ptr(|| {
        // SAFETY: per the contract.
        let h = unsafe { handle(rb)? };
        let t = held_of(h, seq)?;
        if let Held::Replay(_, r) = &*t {
            // A graph readback has one bucket, and says so for every other index or column.
            let readout = r.readout();
            if readout.bucket_count(bucket as usize).is_none() {
                return Err(invalid(format!("bucket {bucket} does not exist")));
            }
            if column as usize >= h.columns() {
                return Err(invalid(format!("column {column} does not exist")));
            }
        }
        let (p, n) = t
            .data(column as usize, bucket as usize)?
            .ok_or_else(|| in_flight(seq))?;
        if !count_out.is_null() {
            // SAFETY: per the contract.
            unsafe { *count_out = n as u64 };
        }
        Ok(p.cast())
    })
}
