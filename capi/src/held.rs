//! The readbacks a caller holds (tickets from `srb_enqueue` and `srb_append_end`, replays from
//! `srb_next`, each until `srb_release`) and what the calls read from them. Below the handle:
//! a handle owns a table of them, and finds them by number (`handle::held_of`).
use crate::boundary::lock;
use srb::{AppendTicket, ColumnReadout, ColumnTicket, Error, OwnedReplay, Result};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One readback the caller holds.
pub(crate) enum Held {
    Pack(ColumnTicket),
    /// An append, and the fetch of its spill once asked for.
    Append(AppendTicket, Mutex<Option<Arc<ColumnTicket>>>),
    /// A replay taken by `srb_next`, and the fetch of its spill once asked for.
    Replay(Mutex<Option<Arc<ColumnTicket>>>, OwnedReplay),
}

/// The readbacks the caller holds. Host-sequenced: at most one per slot (a slot is not handed
/// out again until released); graph: every replay taken and not released.
pub(crate) type HeldTable = Mutex<Vec<Arc<Held>>>;

/// Holds `t` until `srb_release` of its number.
pub(crate) fn hold(h: &HeldTable, t: Held) {
    lock(h).push(Arc::new(t));
}

impl Held {
    /// The sequence number the caller addresses it by.
    pub(crate) fn seq(&self) -> u64 {
        match self {
            Held::Pack(t) => t.seq(),
            Held::Append(t, _) => t.seq(),
            Held::Replay(_, r) => r.seq(),
        }
    }

    /// Whether complete; its count (rows in the slot) or error.
    pub(crate) fn poll(&self) -> Result<Option<usize>> {
        match self {
            Held::Pack(t) => Ok(t.try_wait()?.map(|r| r.count())),
            Held::Append(t, _) => Ok(t.try_wait()?.map(|r| r.count())),
            Held::Replay(_, r) => Ok(Some(r.count())),
        }
    }

    /// Rows in the slot over every bucket, once complete.
    pub(crate) fn rows(&self) -> Result<usize> {
        let rows = |r: ColumnReadout<'_>| r.count();
        match self {
            Held::Replay(_, r) => Ok(r.count()),
            Held::Pack(t) => Ok(t.try_wait()?.map(rows).unwrap_or(0)),
            Held::Append(t, _) => match t.try_wait() {
                Ok(r) => Ok(r.map(rows).unwrap_or(0)),
                Err(Error::AppendOverflow { .. } | Error::BadBucket { .. }) => {
                    Ok(rows(t.partial()?))
                }
                Err(e) => Err(e),
            },
        }
    }

    /// Waits for completion (at most `timeout`); its count or error.
    pub(crate) fn wait(&self, timeout: Option<Duration>) -> Result<usize> {
        match (self, timeout) {
            (Held::Pack(t), None) => t.wait().map(|r| r.count()),
            (Held::Pack(t), Some(d)) => t.wait_timeout(d).map(|r| r.count()),
            (Held::Append(t, _), None) => t.wait().map(|r| r.count()),
            (Held::Append(t, _), Some(d)) => t.wait_timeout(d).map(|r| r.count()),
            (Held::Replay(_, r), _) => Ok(r.count()),
        }
    }

    /// The address of `column`'s rows of bucket `bucket` once complete (an overflowed append:
    /// its slot rows), and their count; `None` while in flight.
    pub(crate) fn data(&self, column: usize, bucket: usize) -> Result<Option<(*const u8, usize)>> {
        let bytes = |r: ColumnReadout<'_>| {
            let n = r.bucket_count(bucket).unwrap_or(0);
            r.bucket_column_bytes(column, bucket)
                .map(|b| (b.as_ptr(), n))
        };
        match self {
            Held::Replay(_, r) => bytes(r.readout()).map(Some),
            Held::Pack(t) => t.try_wait()?.map(bytes).transpose(),
            Held::Append(t, _) => match t.try_wait() {
                Ok(None) => Ok(None),
                Ok(Some(r)) => bytes(r).map(Some),
                Err(Error::AppendOverflow { .. } | Error::BadBucket { .. }) => {
                    bytes(t.partial()?).map(Some)
                }
                Err(e) => Err(e),
            },
        }
    }

    /// The fetch of the spill of a held append or replay, once asked for.
    pub(crate) fn spill(&self) -> Option<&Mutex<Option<Arc<ColumnTicket>>>> {
        match self {
            Held::Append(_, spill) | Held::Replay(spill, _) => Some(spill),
            Held::Pack(_) => None,
        }
    }
}
