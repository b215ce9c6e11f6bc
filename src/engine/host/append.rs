//! The append path of a host-sequenced readback: a slot reserved for the user's kernel
//! (`append_begin`), completed after its launch (`append_end`), and the fetch of the rows it
//! spilled.
use super::spill_fetch;
use super::HostEngine;
use crate::engine::ring::Lease;
use crate::engine::ticket::TicketCore;
use crate::error::Result;
use crate::raw::abi;
use crate::raw::driver;
use crate::source::RawCount;
use cudarc::driver::sys::{CUevent, CUstream};
use std::sync::atomic::Ordering;

impl HostEngine {
    /// Reserves a slot for an append kernel on `stream` (after `after`, if given) and returns
    /// it with the kernel's descriptor. The caller launches the kernel on `stream`, then calls
    /// [`Self::append_end`] whatever happened.
    ///
    /// # Safety
    /// `stream` and `after` are live handles of this context.
    pub(crate) unsafe fn append_begin(
        &self,
        stream: CUstream,
        after: Option<CUevent>,
    ) -> Result<(Lease, abi::srb_append_desc, u64)> {
        // SAFETY: per the contract.
        unsafe { self.prepare(stream, after)? };
        let lease = self.acquire()?;
        let result = (|| {
            // SAFETY: per the contract; the lease is held.
            let id = unsafe { self.order_after_previous(stream, &lease)? };
            if self.state[lease.slot].scratch_dirty.load(Ordering::Relaxed) {
                // An earlier append into this slot never finished (or was dropped before it was
                // seen to): its count and departures may still be in the scratch.
                // SAFETY: the slot's records, ordered after their previous use by the wait above.
                unsafe {
                    driver::memset_zero_async(self.sync_ptr(lease.slot), Self::SYNC_BYTES, stream)?;
                    if let Some((ptr, bytes)) = self.bucket_counts_of(lease.slot) {
                        driver::memset_zero_async(ptr, bytes, stream)?;
                    }
                }
            }
            // Unconfirmed until a wait sees this append's trailer.
            self.mark_scratch(lease.slot, true);
            Ok((self.append_desc(&lease), id))
        })();
        match result {
            Ok((desc, id)) => Ok((lease, desc, id)),
            Err(e) => {
                self.release(&lease);
                Err(e)
            }
        }
    }

    /// Completes the append of [`Self::append_begin`] after the user's launch: the staged copy
    /// and the slot's event. `launched` is the user's outcome; on an error the slot's scratch
    /// is reset before its next append and the lease given back.
    ///
    /// # Safety
    /// `stream` is the one `append_begin` was given; `lease` came from it.
    pub(crate) unsafe fn append_end(
        &self,
        stream: CUstream,
        lease: &Lease,
        id: u64,
        launched: Result<()>,
    ) -> Result<()> {
        // SAFETY: per the contract.
        let completed = unsafe { self.complete(stream, lease, id, launched.is_ok()) };
        let result = launched.and(completed);
        if result.is_err() {
            self.mark_scratch(lease.slot, true);
            self.release(lease);
        }
        result
    }

    /// The append descriptor of `lease`'s slot.
    fn append_desc(&self, lease: &Lease) -> abi::srb_append_desc {
        let layout = self.slots.layout();
        abi::srb_append_desc {
            seq: lease.seq,
            slot: lease.slot as u32,
            num_buckets: layout.buckets() as u32,
            bucket_table: layout.bucket_table_offset() as u64,
            bucket_counts: self.bucket_counts.as_ref().map_or(0, |b| b.ptr()),
            ..self
                .slots
                .append_desc(self.spill.as_ref().map(|s| s.area()))
        }
    }

    /// Brings back the rows that the append in `lease`'s slot wrote to the spill region: the
    /// spill region's fetch, ordered after the append, with the slot's event moved past it
    /// (so the slot's next append waits for the fetch). `None` when the readback has no spill
    /// region.
    ///
    /// # Safety
    /// `stream` is a live stream of this context; `lease` is held by the caller, and its
    /// append is complete.
    pub(crate) unsafe fn fetch_spill(
        &self,
        stream: CUstream,
        lease: &Lease,
    ) -> Result<Option<TicketCore>> {
        let Some(spill) = &self.spill else {
            return Ok(None);
        };
        // The rows each bucket spilled: the append's last block kept them.
        let count = match self.bucket_counts_of(lease.slot) {
            Some((ptr, bytes)) => RawCount::u64(ptr + (bytes / 2) as u64),
            None => RawCount::u64(
                self.sync_ptr(lease.slot)
                    + std::mem::offset_of!(abi::srb_slot_sync, spilled) as u64,
            ),
        };
        let after = Some(self.events[lease.slot].raw());
        // SAFETY: per the contract; the spill region and the counters belong to this engine
        // and stay unwritten while the lease is held and its append is complete; the slot's
        // event is recorded after the fetch below, so the next append waits for it.
        let fetched = unsafe {
            spill_fetch::fetch(
                spill,
                self.context(),
                self.slots.config(),
                stream,
                after,
                lease.slot,
                count,
            )?
        };
        // SAFETY: the stream is of this context; the lease is held.
        unsafe { self.events[lease.slot].record(stream)? };
        self.state[lease.slot].stream.store(0, Ordering::Relaxed);
        Ok(Some(fetched))
    }
}
