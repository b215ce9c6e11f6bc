//! The fetch of an append's spilled rows, for both engines: a pack (bucketed: a bucket pack)
//! from the spill region into a host-sequenced readback of its own, made on first use.
use super::{HostEngine, Spill};
use crate::config::ReadbackConfig;
use crate::engine::pack_params::Pack;
use crate::engine::plan::{Filler, Sequencing, SlotPlan};
use crate::engine::ticket::TicketCore;
use crate::engine::trailer::{Fill, Lens};
use crate::error::Result;
use crate::layout::BucketTable;
use crate::source::RawCount;
use cudarc::driver::sys::{CUevent, CUstream};
use cudarc::driver::CudaContext;
use std::sync::Arc;

/// Enqueues on `stream`, after `after`, the fetch of the rows `spill` holds from slot `slot`,
/// counted by `count` (a `u64` per bucket). The fetch's readback is made on first use, in
/// `ctx`, with `cfg`'s settings for the region's rows and the fetch's slots.
///
/// # Safety
/// `stream` and `after` are live handles of `ctx`, the region's context; the append that
/// wrote slot `slot`'s region and `count` is complete, and neither is written again until the
/// fetch completes (the caller orders the slot's next append after it).
pub(crate) unsafe fn fetch(
    spill: &Spill,
    ctx: &Arc<CudaContext>,
    cfg: &ReadbackConfig,
    stream: CUstream,
    after: Option<CUevent>,
    slot: usize,
    count: RawCount,
) -> Result<TicketCore> {
    let engine = spill.fetcher(|| {
        let plan = SlotPlan::new(
            spill.layout().elem_sizes(),
            &spill.fetch_config(cfg),
            Sequencing::Host,
            BucketTable::IfBucketed,
            Filler::Pack,
        )?;
        HostEngine::packs(ctx, plan)
    })?;
    let (cols, offsets) = spill.sources(slot);
    let pack = Pack {
        sources: &cols,
        count,
        offsets,
    };
    // SAFETY: per the contract; the region, its offsets and the count are device memory of
    // this context that the fetch reads in bounds (a slot's region holds every bucket's rows
    // of every column).
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
