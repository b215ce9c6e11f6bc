//! The device-side spill region of an append readback, where rows past a slot's capacity go,
//! and what the one fetch that brings them back packs (the fetch itself, a pack from the region
//! into a readback of its own made on first use, is the host engine's: `host/spill_fetch.rs`).
use super::pack_params::SpillArea;
use crate::config::ReadbackConfig;
use crate::error::Result;
use crate::layout::{BucketTable, SlotLayout};
use crate::raw::buffer::DeviceBuffer;
use crate::source::ColumnSource;
use cudarc::driver::sys::CUdeviceptr;
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
/// a slot without trailer. `F` is the readback that fetches spilled rows (the host engine):
/// generic, so that the region knows nothing of the engines that hold it.
#[derive(Debug)]
pub(crate) struct SpillRegion<F> {
    rows: usize,
    buffer: DeviceBuffer,
    layout: SlotLayout,
    /// Bucketed: the k offsets b * rows of the region's buckets (device memory), for the
    /// fetch's bucket pack.
    offsets: Option<DeviceBuffer>,
    /// Slots of the fetch's readback.
    fetch_slots: usize,
    /// The readback that brings spilled rows back (made on first use).
    fetch: OnceLock<Arc<F>>,
}

impl<F> SpillRegion<F> {
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
            let words: Vec<u8> = (0..k as u64)
                .flat_map(|b| (b * rows as u64).to_le_bytes())
                .collect();
            Some(DeviceBuffer::new_with(ctx, words.len(), &words)?)
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

    /// The region as an append descriptor gives it to the kernel.
    pub(crate) fn area(&self) -> SpillArea<'_> {
        SpillArea {
            base: self.buffer.ptr(),
            rows: self.rows,
            layout: &self.layout,
        }
    }

    /// What a fetch of slot `slot`'s spilled rows packs: every column's region of that slot
    /// (the rows of every bucket), and the buckets' offsets if bucketed.
    pub(crate) fn sources(&self, slot: usize) -> (Vec<ColumnSource>, Option<CUdeviceptr>) {
        let base = self.buffer.ptr() + (slot * self.layout.slot_stride()) as u64;
        let len = self.rows * self.layout.buckets();
        let cols = self
            .layout
            .column_offsets()
            .iter()
            .map(|&off| ColumnSource {
                ptr: base + off as u64,
                len,
            })
            .collect();
        (cols, self.offsets.as_ref().map(|o| o.ptr()))
    }

    /// The settings of the fetch's readback: `cfg`'s, for this region's rows and the fetch's
    /// slots.
    pub(crate) fn fetch_config(&self, cfg: &ReadbackConfig) -> ReadbackConfig {
        let mut cfg = cfg.clone();
        cfg.capacity = self.rows;
        cfg.slots = self.fetch_slots;
        cfg.spill = None;
        cfg
    }

    /// The region's layout (a slot's, without trailer).
    pub(crate) fn layout(&self) -> &SlotLayout {
        &self.layout
    }

    /// The fetch's readback, made by `make` on first use.
    pub(crate) fn fetcher(&self, make: impl FnOnce() -> Result<Arc<F>>) -> Result<Arc<F>> {
        if let Some(e) = self.fetch.get() {
            return Ok(e.clone());
        }
        let e = make()?;
        Ok(self.fetch.get_or_init(|| e).clone())
    }
}
