//! What a readback is, in one value: [`ReadbackInfo`].
use crate::config::{StagedCopy, Transport, WaitMode};
use crate::launch::LaunchShape;
use crate::layout::SlotLayout;
use cudarc::driver::CudaContext;
use std::sync::Arc;

/// A readback's settings in effect and its slots' layout, from `info()` of every readback
/// type ([`crate::Readback::info`], [`crate::ColumnReadback::info`],
/// [`crate::BucketReadback::info`], [`crate::AppendReadback::info`],
/// [`crate::GraphReadback::info`]), alike for all of them. A snapshot: after a `grow`, ask
/// again.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let ctx = sized_readback::device::open(0)?;
/// let rb = sized_readback::Readback::<f64>::new(&ctx, 1 << 20)?;
/// let info = rb.info();
/// assert_eq!((info.capacity, info.buckets), (1 << 20, 1));
/// println!("{} slots of {} bytes", info.slots, info.layout.slot_stride());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReadbackInfo {
    /// Rows (elements of every column) one slot holds; per bucket, bucketed.
    pub capacity: usize,
    /// Number of slots: readbacks in flight or held at once (for a graph readback, how many
    /// replays may run ahead of the host). Per set under [`Transport::Auto`], which has two.
    pub slots: usize,
    /// Buckets of a slot (1 unless bucketed).
    pub buckets: usize,
    /// Rows of an append readback's device-side spill region per slot (per bucket); 0 without
    /// one.
    pub spill_capacity: usize,
    /// How the slots reach the host.
    pub transport: Transport,
    /// Staged transport: the copy in use, [`StagedCopy::Whole`] or [`StagedCopy::Sized`] (never
    /// [`StagedCopy::Auto`]); `None` for the mapped transport, which copies nothing.
    pub staged_copy: Option<StagedCopy>,
    /// The wait mode in effect (never [`WaitMode::Auto`]).
    pub wait_mode: WaitMode,
    /// Where each column, the bucket table and the trailer sit in a slot.
    pub layout: SlotLayout,
    /// The pack kernel's launch shape (grid from the capacity, block, programmatic launch), as
    /// it is launched: the sized copy's pack, in a CUDA graph, never programmatically.
    pub launch_shape: LaunchShape,
    /// The context the readback belongs to.
    pub context: Arc<CudaContext>,
    /// [`Transport::Auto`]: the count from which an enqueue goes to the staged slots (the
    /// count the readback last read back decides); `None` for any other transport, or where no
    /// count within the capacity reaches the staged slots (then none are made). The other
    /// fields describe the mapped slots, which serve every smaller count.
    pub auto_staged_from: Option<usize>,
    /// The embedded kernel image the context loaded for the pack kernels: what the device
    /// runs (machine code, or PTX the driver compiled), recorded when the module was loaded.
    /// [`crate::KernelImage::for_context`] says which image would be chosen now, from the
    /// device and the environment (`CUDA_FORCE_PTX_JIT`); this is the one in use.
    pub kernel_image: crate::KernelImage,
}
