//! The kernels' parameters, built from a slot layout and where the slots live: the pack's
//! ([`pack_params`]), the bucket pack's ([`pack_buckets_params`]), the append descriptor's
//! shared fields ([`append_desc`]), and the pack's grid ([`pack_grid`]). Pure host logic but
//! the grid's one device attribute; the one place each of these records is built, for the
//! engines and the testing module's bare sized copy alike.
use crate::error::{Error, Result};
use crate::layout::{SlotLayout, MAX_COLUMNS};
use crate::raw::abi;
use crate::source::{ColumnSource, RawCount};
use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::CudaContext;
use std::sync::Arc;

/// What one pack reads: the sources, the count (a bucket pack's k counts) and, for a bucket
/// pack, the device address of its k offsets.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pack<'a> {
    pub(crate) sources: &'a [ColumnSource],
    pub(crate) count: RawCount,
    pub(crate) offsets: Option<CUdeviceptr>,
}

/// Which slot a pack writes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SlotAt {
    /// Slot `slot`, leased by the host for readback `seq`.
    Host { seq: u64, slot: usize },
    /// The slot the kernel takes on the device from the sequence counter at `counter`, if the
    /// ring control at `ctl` says it is released (graph replay).
    Device {
        counter: CUdeviceptr,
        ctl: CUdeviceptr,
    },
}

/// Where a pack writes: the device address of slot 0 (the staging buffer, or the mapped host
/// slots), the device address of the slots' [`abi::srb_slot_sync`] records, and how many slots
/// there are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PackTarget {
    pub(crate) slots: CUdeviceptr,
    pub(crate) slot_sync: CUdeviceptr,
    pub(crate) num_slots: usize,
}

/// The pack kernel's parameter for `columns` and `count`, into the slot `at` says of slots laid
/// out by `layout` at `target`.
pub(crate) fn pack_params(
    layout: &SlotLayout,
    target: PackTarget,
    columns: &[ColumnSource],
    count: RawCount,
    at: SlotAt,
) -> abi::srb_pack_params {
    let (seq, slot, seq_counter, ring_ctl) = match at {
        SlotAt::Host { seq, slot } => (seq, slot, 0, 0),
        SlotAt::Device { counter, ctl } => (0, 0, counter, ctl),
    };
    abi::srb_pack_params {
        count_ptr: count.ptr(),
        slots: target.slots,
        slot_stride: layout.slot_stride() as u64,
        trailer_offset: layout.trailer_offset() as u64,
        capacity: layout.capacity() as u64,
        seq,
        seq_counter,
        ring_ctl,
        slot_sync: target.slot_sync,
        slot: slot as u32,
        num_slots: target.num_slots as u32,
        count_kind: count.kind().abi(),
        num_columns: columns.len() as u32,
        columns: abi_columns(layout, columns),
    }
}

/// The bucket pack kernel's parameter for `columns` (each a source of `len` elements that the
/// k buckets partition), `counts` and `offsets` (k each, of `counts`' kind), into host slot
/// `slot` for readback `seq` (bucket packs are never device-sequenced).
pub(crate) fn pack_buckets_params(
    layout: &SlotLayout,
    target: PackTarget,
    columns: &[ColumnSource],
    counts: RawCount,
    offsets: CUdeviceptr,
    (seq, slot): (u64, usize),
) -> abi::srb_pack_buckets_params {
    abi::srb_pack_buckets_params {
        counts_ptr: counts.ptr(),
        offsets_ptr: offsets,
        slots: target.slots,
        slot_stride: layout.slot_stride() as u64,
        trailer_offset: layout.trailer_offset() as u64,
        bucket_table: layout.bucket_table_offset() as u64,
        capacity: layout.capacity() as u64,
        seq,
        slot_sync: target.slot_sync,
        slot: slot as u32,
        num_slots: target.num_slots as u32,
        count_kind: counts.kind().abi(),
        num_buckets: layout.buckets() as u32,
        num_columns: columns.len() as u32,
        reserved: 0,
        columns: abi_columns(layout, columns),
    }
}

/// An append readback's spill region as its descriptor gives it to the kernel.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpillArea<'a> {
    /// Device address of slot 0's region.
    pub(crate) base: CUdeviceptr,
    /// Rows per slot (per bucket).
    pub(crate) rows: usize,
    /// The region's layout (a slot's, without trailer).
    pub(crate) layout: &'a SlotLayout,
}

/// The append descriptor's fields every engine fills alike: the slots at `target`, their
/// layout and columns, and the spill region if any. The engine adds how the kernel takes its
/// slot (host- or device-sequenced) and the buckets.
pub(crate) fn append_desc(
    layout: &SlotLayout,
    target: PackTarget,
    spill: Option<SpillArea<'_>>,
) -> abi::srb_append_desc {
    let mut d = abi::srb_append_desc {
        slots: target.slots,
        slot_stride: layout.slot_stride() as u64,
        trailer_offset: layout.trailer_offset() as u64,
        capacity: layout.capacity() as u64,
        slot_sync: target.slot_sync,
        num_slots: target.num_slots as u32,
        num_columns: layout.elem_sizes().len() as u32,
        ..Default::default()
    };
    for (i, (&off, &size)) in layout
        .column_offsets()
        .iter()
        .zip(layout.elem_sizes())
        .enumerate()
    {
        d.column_offset[i] = off as u64;
        d.elem_size[i] = size as u32;
    }
    if let Some(spill) = spill {
        d.spill = spill.base;
        d.spill_stride = spill.layout.slot_stride() as u64;
        d.spill_capacity = spill.rows as u64;
        for (i, &off) in spill.layout.column_offsets().iter().enumerate() {
            d.spill_offset[i] = off as u64;
        }
    }
    d
}

/// The kernels' column records: each source, and where its column sits in a slot of `layout`.
fn abi_columns(layout: &SlotLayout, columns: &[ColumnSource]) -> [abi::srb_column; MAX_COLUMNS] {
    let mut out: [abi::srb_column; MAX_COLUMNS] = Default::default();
    for (i, c) in columns.iter().enumerate() {
        out[i] = abi::srb_column {
            src: c.ptr,
            src_len: c.len as u64,
            dst_offset: layout.column_offsets()[i] as u64,
            elem_size: layout.elem_sizes()[i] as u32,
            reserved: 0,
        };
    }
    out
}

/// The pack's grid for slots laid out by `layout` on `ctx`'s device: a block per
/// [`abi::SRB_BYTES_PER_BLOCK`] bytes of a full slot, at least one, at most `max_blocks` (by
/// default four per multiprocessor).
pub(crate) fn pack_grid(
    ctx: &Arc<CudaContext>,
    layout: &SlotLayout,
    max_blocks: Option<u32>,
) -> Result<u32> {
    let sms = ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(Error::cuda("cuDeviceGetAttribute"))?;
    let max_blocks = max_blocks.unwrap_or((sms.max(1) as u32) * 4).max(1);
    let want = layout
        .row_bytes()
        .saturating_mul(layout.capacity())
        .div_ceil(abi::SRB_BYTES_PER_BLOCK as usize);
    Ok(want.clamp(1, max_blocks.min(i32::MAX as u32) as usize) as u32)
}
