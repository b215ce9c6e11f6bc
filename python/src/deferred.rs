//! Tickets dropped while their readback was in flight: their slot and what they read stay
//! held until the readback is seen complete, so no enqueue records an event of its own for
//! that case.
use crate::core_ticket::Core;
use crate::keep::Keep;
use crate::wait_clock::WAIT_SLICE;
use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The slot set a ticket took: one per transport and per generation (each `grow` makes new
/// slots; tickets handed out before keep the old ones). A dropped ticket frees a slot only of
/// its own set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Pool {
    pub(crate) staged: bool,
    pub(crate) generation: u64,
}

/// The dropped, unfinished tickets of one readback: their slot set, their slot (still held)
/// and what they read, oldest first.
#[derive(Default)]
pub(crate) struct Deferred {
    list: Mutex<Vec<(Pool, Core, Keep)>>,
    /// Whether `list` may be non-empty (read without the lock on every enqueue).
    any: AtomicBool,
}

impl Deferred {
    fn lock(&self) -> MutexGuard<'_, Vec<(Pool, Core, Keep)>> {
        self.list.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps the slot of a dropped ticket whose readback is in flight, and what it reads,
    /// until the readback completes.
    pub(crate) fn defer(&self, pool: Pool, core: Core, keep: Keep) {
        self.lock().push((pool, core, keep));
        self.any.store(true, Ordering::Release);
    }

    /// Lets go of the dropped tickets whose readback has completed (their slots and arrays).
    /// Free while none is deferred (one atomic load). Otherwise each deferred ticket is polled:
    /// a mapped slot whose trailer is visible in host memory costs no driver call; one whose
    /// trailer is not there yet (still in flight), and every staged slot (its trailer arrives
    /// by the copy, so completion is the event's), costs a `cuEventQuery` (and a
    /// `cuCtxGetCurrent`).
    pub(crate) fn sweep(&self) {
        if !self.any.load(Ordering::Acquire) {
            return;
        }
        let mut released = Vec::new();
        {
            let mut list = self.lock();
            let mut i = 0;
            while i < list.len() {
                if matches!(list[i].1.try_wait(), Ok(None)) {
                    i += 1;
                } else {
                    released.push(list.remove(i));
                }
            }
            if list.is_empty() {
                self.any.store(false, Ordering::Release);
            }
        }
        // Dropped outside the lock: a destructor may run Python code that enqueues.
        drop(released);
    }

    /// After an enqueue into `pool` found every slot held: waits for the oldest dropped ticket
    /// of that slot set (the only ones whose completion frees a slot the enqueue can take)
    /// and frees its slot. The wait releases the GIL in slices of [`WAIT_SLICE`] and checks
    /// for signals between them (Ctrl-C raises `KeyboardInterrupt`, and the ticket stays
    /// deferred). `Ok(false)` when no dropped ticket of `pool` holds a slot (the slots are
    /// held by live tickets or readouts: nothing to wait for).
    pub(crate) fn free_oldest(&self, py: Python<'_>, pool: Pool) -> PyResult<bool> {
        let (core, keep) = {
            let mut list = self.lock();
            let Some(i) = list.iter().position(|(p, ..)| *p == pool) else {
                return Ok(false);
            };
            let (_, core, keep) = list.remove(i);
            if list.is_empty() {
                self.any.store(false, Ordering::Release);
            }
            (core, keep)
        };
        loop {
            let r = py.detach(|| match core.wait_timeout(WAIT_SLICE) {
                Err(srb::Error::Timeout { .. }) => false,
                // Complete, or failed: its errors are its own (the ticket was dropped, no one
                // reads them).
                _ => true,
            });
            if r {
                break;
            }
            if let Err(e) = py.check_signals() {
                // Still in flight: back to the front, slot and arrays held.
                self.lock().insert(0, (pool, core, keep));
                self.any.store(true, Ordering::Release);
                return Err(e);
            }
        }
        drop(core);
        drop(keep);
        Ok(true)
    }

    /// Waits for every deferred ticket and lets go of it: the price of dropping a readback
    /// whose dropped tickets are still being read (their arrays must outlive the read).
    pub(crate) fn drain(&mut self) {
        let list = self.list.get_mut().unwrap_or_else(|p| p.into_inner());
        for (_, core, keep) in list.drain(..) {
            let _ = core.wait_timeout(std::time::Duration::MAX);
            drop(core);
            drop(keep);
        }
        self.any.store(false, Ordering::Release);
    }
}
