//! Append kernels: `srb_append_begin` and `srb_append_end` around the caller's launch, and
//! the descriptor of a graph readback's append kernels, `srb_append_desc_graph`.
use crate::args::{event_of, stream_of};
use crate::boundary::{guard, invalid, lock};
use crate::codes::SRB_OK;
use crate::handle::{handle, srb_readback, Inner};
use crate::held::{hold, Held};
use crate::types::{srb_append_desc, CUevent_st, CUstream_st};
use srb::__internal::raw_append_desc;
use std::sync::Mutex;

/// Append mode: reserves a slot for one append kernel on `stream` (after `after`, if not
/// null), stores its descriptor in `*desc_out` (pass it by value to the kernel, which appends
/// through `srb::BlockAppend`) and its sequence number in `*seq_out`. Launch exactly one grid
/// with the descriptor on `stream`, then call `srb_append_end` whatever the launch did.
///
/// # Safety
/// `desc_out` and `seq_out` are writable; `stream` and `after` are live handles of the
/// readback's context.
#[no_mangle]
pub unsafe extern "C" fn srb_append_begin(
    rb: *const srb_readback,
    stream: *mut CUstream_st,
    after: *mut CUevent_st,
    desc_out: *mut srb_append_desc,
    seq_out: *mut u64,
) -> i32 {
    guard(|| {
        // SAFETY: per the contract.
        let Inner::Append { rb, pending, .. } = &unsafe { handle(rb)? }.inner else {
            return Err(invalid(
                "srb_append_begin needs a readback created with srb_create_append without \
                 SRB_FLAG_GRAPH (graph appends use srb_append_desc_graph)",
            ));
        };
        if desc_out.is_null() || seq_out.is_null() {
            return Err(invalid("desc_out or seq_out is null"));
        }
        // SAFETY: per the contract (the caller keeps the stream alive until srb_append_end).
        let p = unsafe { rb.begin_raw_stream(stream_of(stream), event_of(after))? };
        // SAFETY: per the contract.
        unsafe {
            *desc_out = raw_append_desc(p.desc());
            *seq_out = p.seq();
        }
        lock(pending).push(p);
        Ok(SRB_OK)
    })
}

/// Append mode: the kernel of append `seq` was launched (`launch_status` 0: records the
/// readback's completion on the stream `srb_append_begin` was given; then wait on `seq` as on
/// any readback) or its launch failed (`launch_status` != 0: the slot is given back, and `seq`
/// is no readback any more). Returns `SRB_OK` in both cases, unless `seq` was not begun.
///
/// # Safety
/// `rb` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn srb_append_end(
    rb: *const srb_readback,
    seq: u64,
    launch_status: i32,
) -> i32 {
    guard(|| {
        // SAFETY: per the contract.
        let Inner::Append { pending, held, .. } = &unsafe { handle(rb)? }.inner else {
            return Err(invalid("srb_append_end needs an append readback"));
        };
        let p = {
            let mut pending = lock(pending);
            let at = pending
                .iter()
                .position(|p| p.seq() == seq)
                .ok_or_else(|| invalid(format!("no append {seq} was begun")))?;
            pending.swap_remove(at)
        };
        if launch_status != 0 {
            // Dropping the pending append records the slot as failed and gives it back.
            drop(p);
            return Ok(SRB_OK);
        }
        hold(held, Held::Append(p.launched()?, Mutex::new(None)));
        Ok(SRB_OK)
    })
}

/// Graph append mode (a readback from `srb_create_append` with `SRB_FLAG_GRAPH`): the
/// descriptor that every captured append kernel of this readback takes, for every replay.
///
/// # Safety
/// `desc_out` is writable.
#[no_mangle]
pub unsafe extern "C" fn srb_append_desc_graph(
    rb: *const srb_readback,
    desc_out: *mut srb_append_desc,
) -> i32 {
    guard(|| {
        // SAFETY: per the contract.
        let Inner::Graph { g, .. } = &unsafe { handle(rb)? }.inner else {
            return Err(invalid(
                "srb_append_desc_graph needs a readback created with SRB_FLAG_GRAPH",
            ));
        };
        if desc_out.is_null() {
            return Err(invalid("desc_out is null"));
        }
        let d = g.append_desc()?;
        // SAFETY: per the contract.
        unsafe { *desc_out = raw_append_desc(&d) };
        Ok(SRB_OK)
    })
}
