//! The readback handle (`srb_readback`): which readback it is, its table of held readbacks
//! and the lookup of one by number, and the calls on the handle itself (`srb_destroy`,
//! `srb_capacity`, `srb_buckets`, `srb_staged_copy`).
use crate::boundary::{guard, invalid, lock, Failure};
use crate::codes::SRB_OK;
use crate::held::{Held, HeldTable};
use srb::{
    AppendReadback, BucketReadback, ColumnReadback, GraphReadback, PendingAppend, ReadbackInfo,
    StagedCopy,
};
use std::sync::{Arc, Mutex};

/// An opaque readback handle, from `srb_create`, `srb_create_append` or `srb_create_buckets`, freed by
/// `srb_destroy`.
pub struct srb_readback {
    pub(crate) inner: Inner,
}

/// The readback behind a handle, by how it is filled and sequenced.
pub(crate) enum Inner {
    Host {
        rb: ColumnReadback,
        held: HeldTable,
    },
    Buckets {
        rb: BucketReadback,
        held: HeldTable,
    },
    Append {
        rb: AppendReadback,
        held: HeldTable,
        /// Appends begun and not ended (the caller keeps their streams alive meanwhile).
        pending: Mutex<Vec<PendingAppend<'static>>>,
    },
    Graph {
        g: Arc<GraphReadback>,
        held: HeldTable,
    },
}

impl srb_readback {
    /// Columns of the readback.
    pub(crate) fn columns(&self) -> usize {
        match &self.inner {
            Inner::Host { rb, .. } => rb.schema().len(),
            Inner::Buckets { rb, .. } => rb.schema().len(),
            Inner::Append { rb, .. } => rb.schema().len(),
            Inner::Graph { g, .. } => g.schema().len(),
        }
    }

    /// The readback's settings and layout, whatever its kind.
    pub(crate) fn info(&self) -> ReadbackInfo {
        match &self.inner {
            Inner::Host { rb, .. } => rb.info(),
            Inner::Buckets { rb, .. } => rb.info(),
            Inner::Append { rb, .. } => rb.info(),
            Inner::Graph { g, .. } => g.info(),
        }
    }

    /// Buckets of the readback (1 unless bucketed).
    pub(crate) fn buckets(&self) -> usize {
        self.info().buckets
    }
}

/// The handle behind `rb`; `SRB_ERR_INVALID_ARGUMENT` for null.
///
/// # Safety
/// `rb` is null or a live handle from `srb_create`.
pub(crate) unsafe fn handle<'a>(rb: *const srb_readback) -> Result<&'a srb_readback, Failure> {
    // SAFETY: per the contract.
    unsafe { rb.as_ref() }.ok_or_else(|| invalid("the readback handle is null"))
}

/// The table of the readbacks `h`'s caller holds.
pub(crate) fn table(h: &srb_readback) -> &HeldTable {
    match &h.inner {
        Inner::Host { held, .. }
        | Inner::Append { held, .. }
        | Inner::Buckets { held, .. }
        | Inner::Graph { held, .. } => held,
    }
}

/// The held readback (or replay) `seq`, cloned out of the table.
pub(crate) fn held_of(h: &srb_readback, seq: u64) -> Result<Arc<Held>, Failure> {
    lock(table(h))
        .iter()
        .find(|t| t.seq() == seq)
        .cloned()
        .ok_or_else(|| not_held(h, seq, "(released, or never enqueued)"))
}

/// `seq` is not held: `SRB_ERR_INVALID_ARGUMENT`, in a graph readback's words or a ticket's.
pub(crate) fn not_held(h: &srb_readback, seq: u64, why: &str) -> Failure {
    invalid(match h.inner {
        Inner::Graph { .. } => format!("replay {seq} is not held"),
        _ if why.is_empty() => format!("no readback {seq} is held"),
        _ => format!("no readback {seq} is held {why}"),
    })
}

/// Host-sequenced mode: the held readback `seq`, for the calls that wait on a number.
pub(crate) fn waitable(h: &srb_readback, seq: u64) -> Result<Arc<Held>, Failure> {
    if let Inner::Graph { .. } = h.inner {
        return Err(invalid(
            "a graph readback is consumed with srb_next, not by waiting on a number",
        ));
    }
    held_of(h, seq)
}

/// Buckets of the readback (1 unless bucketed; 0 if `rb` is null).
///
/// # Safety
/// `rb` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn srb_buckets(rb: *const srb_readback) -> u32 {
    // SAFETY: per the contract.
    unsafe { rb.as_ref() }.map_or(0, |h| h.buckets() as u32)
}

/// Destroys a readback (null is ignored). Waits for its readbacks still in flight (for a
/// graph readback, for all of the context's work: call it while no stream of the context is
/// capturing, in any thread); appends begun and not ended are ended as failed first. Launching
/// a graph that recorded it afterwards is undefined behaviour.
///
/// # Safety
/// `rb` is null or a handle from `srb_create`, destroyed once and not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn srb_destroy(rb: *mut srb_readback) {
    if !rb.is_null() {
        guard(|| {
            // SAFETY: per the contract.
            drop(unsafe { Box::from_raw(rb) });
            Ok(SRB_OK)
        });
    }
}

/// Rows per slot of the readback (0 if `rb` is null).
///
/// # Safety
/// `rb` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn srb_capacity(rb: *const srb_readback) -> usize {
    // SAFETY: per the contract.
    unsafe { rb.as_ref() }.map_or(0, |h| h.info().capacity)
}

/// `srb_staged_copy`: the mapped transport, which copies nothing (or a null handle).
pub const SRB_COPY_NONE: i32 = 0;
/// `srb_staged_copy`: the staged transport copies the whole slot after each pack.
pub const SRB_COPY_WHOLE: i32 = 1;
/// `srb_staged_copy`: the staged transport copies what the count needs, picked on the device.
pub const SRB_COPY_SIZED: i32 = 2;

/// How the readback's slots are copied to the host: `SRB_COPY_SIZED`, `SRB_COPY_WHOLE` (staged)
/// or `SRB_COPY_NONE` (mapped, or `rb` null). Appends and bucketed readbacks copy the whole slot.
///
/// # Safety
/// `rb` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn srb_staged_copy(rb: *const srb_readback) -> i32 {
    // SAFETY: per the contract.
    unsafe { rb.as_ref() }.map_or(SRB_COPY_NONE, |h| match h.info().staged_copy {
        None => SRB_COPY_NONE,
        Some(StagedCopy::Sized) => SRB_COPY_SIZED,
        Some(_) => SRB_COPY_WHOLE,
    })
}
