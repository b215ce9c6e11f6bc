//! The device-side spill region of an append readback, where rows past a slot's capacity go,
//! and the one fetch that brings them back, for both engines: a pack (bucketed: a bucket pack)
//! from the region into a readback of its own, made on first use.
use super::host::HostEngine;
use super::slots::Pack;
use super::ticket::TicketCore;
use super::trailer::{Fill, Lens};
use crate::config::ReadbackConfig;
use crate::error::Result;
use crate::layout::{BucketTable, SlotLayout};
use crate::raw::buffer::DeviceBuffer;
use crate::raw::driver;
use crate::source::{ColumnSource, RawCount};
use cudarc::driver::sys::{CUevent, CUstream};
use cudarc::driver::CudaContext;
use std::sync::{Arc, OnceLock};

/// What a spill region will be: its rows per slot (per bucket), layout and bytes.
#[derive(Debug)]
pub(crate) struct SpillPlan {
    rows: usize,
    layout: SlotLayout,
    bytes: usize,
}

/// `rows` rows of every column per slot (per bucket, bucketed), in device memory, laid out like
/// a slot without trailer.
#[derive(Debug)]
pub(crate) struct SpillRegion {
    pub(super) rows: usize,
    pub(super) buffer: DeviceBuffer,
    pub(super) layout: SlotLayout,
    /// Bucketed: the k offsets b * rows of the region's buckets (device memory), for the
    /// fetch's bucket pack.
    offsets: Option<DeviceBuffer>,
    /// Slots of the fetch's readback.
    fetch_slots: usize,
    /// The readback that brings spilled rows back (made on first use).
    fetch: OnceLock<Arc<HostEngine>>,
}

impl SpillRegion {
    /// The spill region of an append readback of `elem_sizes` with `buckets` buckets and
    /// `cfg`'s slots and spill rows; `None` for 0 rows.
    pub(crate) fn plan(
        elem_sizes: &[usize],
        cfg: &ReadbackConfig,
        buckets: usize,
    ) -> Result<Option<SpillPlan>> {
        match cfg.spill_rows() {
            0 => Ok(None),
            rows => {
                let layout =
                    SlotLayout::with_buckets(rows, elem_sizes, buckets, BucketTable::IfBucketed)?;
                let bytes = layout.total_bytes(cfg.slots)?;
                Ok(Some(SpillPlan {
                    rows,
                    layout,
                    bytes,
                }))
            }
        }
    }

    /// Allocates the region of `plan` in `ctx`; its fetch will have `fetch_slots` slots.
    pub(crate) fn new(ctx: &Arc<CudaContext>, plan: SpillPlan, fetch_slots: usize) -> Result<Self> {
        let SpillPlan {
            rows,
            layout,
            bytes,
        } = plan;
        let k = layout.buckets();
        let offsets = if k > 1 {
            let buf = DeviceBuffer::new_zeroed(ctx, 8 * k)?;
            let words: Vec<u8> = (0..k as u64)
                .flat_map(|b| (b * rows as u64).to_le_bytes())
                .collect();
            driver::bind(ctx)?;
            // SAFETY: the buffer holds k u64, just allocated; nothing uses it yet.
            unsafe { driver::memcpy_htod(buf.ptr(), &words)? };
            Some(buf)
        } else {
            None
        };
        Ok(SpillRegion {
            rows,
            buffer: DeviceBuffer::new_zeroed(ctx, bytes)?,
            layout,
            offsets,
            fetch_slots,
            fetch: OnceLock::new(),
        })
    }

    /// Rows per slot (per bucket).
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Enqueues on `stream`, after `after`, the fetch of the rows spilled from slot `slot`,
    /// counted by `count` (a `u64` per bucket). The fetch's readback is made on first use, in
    /// `ctx`, with `cfg`'s settings for this region's rows and the fetch's slots.
    ///
    /// # Safety
    /// `stream` and `after` are live handles of `ctx`, this region's context; the append that
    /// wrote slot `slot`'s region and `count` is complete, and neither is written again until
    /// the fetch completes (the caller orders the slot's next append after it).
    pub(crate) unsafe fn fetch(
        &self,
        ctx: &Arc<CudaContext>,
        cfg: &ReadbackConfig,
        stream: CUstream,
        after: Option<CUevent>,
        slot: usize,
        count: RawCount,
    ) -> Result<TicketCore> {
        let engine = match self.fetch.get() {
            Some(e) => e.clone(),
            None => {
                let mut cfg = cfg.clone();
                cfg.capacity = self.rows;
                cfg.slots = self.fetch_slots;
                cfg.spill = None;
                let e = HostEngine::packs(
                    ctx,
                    self.layout.elem_sizes(),
                    &cfg,
                    BucketTable::IfBucketed,
                )?;
                self.fetch.get_or_init(|| e).clone()
            }
        };
        let base = self.buffer.ptr() + (slot * self.layout.slot_stride()) as u64;
        let len = self.rows * self.layout.buckets();
        let cols: Vec<ColumnSource> = self
            .layout
            .column_offsets()
            .iter()
            .map(|&off| ColumnSource {
                ptr: base + off as u64,
                len,
            })
            .collect();
        let pack = Pack {
            sources: &cols,
            count,
            offsets: self.offsets.as_ref().map(|o| o.ptr()),
        };
        // SAFETY: per the contract; the region, its offsets and the count are device memory
        // of this context that the fetch reads in bounds (a slot's region holds `len` rows of
        // every column).
        let lease = unsafe {
            engine.prepare(stream, after)?;
            engine.pack(stream, pack)?
        };
        let fill = Fill::Pack {
            kind: count.kind(),
            lens: Lens::of(&cols),
        };
        Ok(TicketCore::new(engine, lease, fill))
    }
}
