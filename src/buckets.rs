//! Bucketed readbacks filled by the bucket pack: device data already partitioned into k
//! buckets, read back in one launch into one slot that holds each bucket's count and rows.
use crate::config::ReadbackConfig;
use crate::element::CountType;
use crate::engine::host::HostEngine;
use crate::engine::pack_params::Pack;
use crate::error::Result;
use crate::info::ReadbackInfo;
use crate::layout::{BucketTable, SlotLayout};
use crate::schema::{ColumnSchema, Source};
use crate::source::{ColumnSource, RawCount};
use crate::ticket::ColumnTicket;
use cudarc::driver::sys::{CUdeviceptr, CUevent, CUstream};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream, DevicePtr};
use std::sync::Arc;

/// Reads back device data the user already partitioned into k buckets (k counts and k rising
/// offsets into every column's source, as CUB's `DevicePartition` or an exclusive scan of the
/// counts leaves them): one pack launch, one slot holding each bucket's count and rows, one
/// trailer. `Send` and `Sync`.
///
/// The capacity is per bucket (`config.capacity` rows each), not shared: a bucket's rows sit at
/// a fixed place in the slot, so the kernel fills every bucket in one pass with no scan of the
/// counts first, and each bucket's rows are contiguous (an MPI send straight from the slot);
/// the price is pinned memory for k full buckets. Size the capacity for the largest bucket.
#[derive(Debug)]
pub struct BucketReadback {
    engine: Arc<HostEngine>,
    schema: Arc<ColumnSchema>,
}

impl BucketReadback {
    /// A readback of `config.buckets` buckets of `config.capacity` rows of the columns of
    /// `schema`.
    ///
    /// Errors as [`crate::ColumnReadback::new`] (more than one bucket is allowed; a spill is
    /// not); [`crate::Error::SizedCopyUnavailable`] for [`crate::StagedCopy::Sized`], which a
    /// bucket pack does not have (`Auto` takes the whole-slot copy).
    pub fn new(
        ctx: &Arc<CudaContext>,
        schema: &ColumnSchema,
        config: ReadbackConfig,
    ) -> Result<Self> {
        schema.validate()?;
        let plan = HostEngine::plan_packs(&schema.elem_sizes(), &config, BucketTable::Always)?;
        Ok(BucketReadback {
            engine: HostEngine::packs(ctx, plan)?,
            schema: Arc::new(schema.clone()),
        })
    }

    /// The checks [`BucketReadback::new`] makes before it touches the driver, as
    /// [`crate::ColumnReadback::check`].
    pub fn check(schema: &ColumnSchema, config: &ReadbackConfig) -> Result<()> {
        schema.validate()?;
        HostEngine::plan_packs(&schema.elem_sizes(), config, BucketTable::Always).map(drop)
    }

    /// The columns.
    pub fn schema(&self) -> &ColumnSchema {
        &self.schema
    }
    /// The readback's settings in effect and its slot layout, in one value: the one place to
    /// read them.
    pub fn info(&self) -> ReadbackInfo {
        self.engine.info()
    }
    /// Buckets of a slot.
    #[deprecated(since = "0.2.0", note = "use `info().buckets`")]
    pub fn buckets(&self) -> usize {
        self.engine.slots().layout().buckets()
    }
    /// Rows of each bucket.
    #[deprecated(since = "0.2.0", note = "use `info().capacity`")]
    pub fn capacity(&self) -> usize {
        self.engine.slots().layout().capacity()
    }
    /// Number of slots.
    #[deprecated(since = "0.2.0", note = "use `info().slots`")]
    pub fn slots(&self) -> usize {
        self.engine.slots().num_slots()
    }
    /// The slot layout (a copy, as every readback type's `layout()`).
    #[deprecated(since = "0.2.0", note = "use `info().layout`")]
    pub fn layout(&self) -> SlotLayout {
        self.engine.slots().layout().clone()
    }

    /// Enqueues the readback of every bucket on `stream`: bucket b's rows are rows
    /// `offsets[b] .. offsets[b] + counts[b]` of every source (`sources` binds each column once,
    /// as for [`crate::ColumnReadback::enqueue`]). `counts` and `offsets` hold (at least) one value per
    /// bucket, of one count type. Returns at once.
    ///
    /// Errors at once as [`crate::ColumnReadback::enqueue`], and
    /// [`crate::Error::BufferTooShort`] when `counts` or `offsets` holds fewer values than
    /// there are buckets; from the ticket's wait ([`crate::ColumnTicket::wait`]):
    /// [`crate::Error::NegativeCount`], [`crate::Error::BucketOverCapacity`],
    /// [`crate::Error::BucketOutOfRange`] (a range past its source or into the next bucket's),
    /// in that order of precedence, each naming the first bucket of its kind, with nothing
    /// copied.
    pub fn enqueue<C, K>(
        &self,
        stream: &CudaStream,
        sources: &[Source<'_>],
        counts: &C,
        offsets: &C,
    ) -> Result<ColumnTicket>
    where
        C: DevicePtr<K>,
        K: CountType,
    {
        let erased = self.schema.bind_erased(sources)?;
        let core = self.engine.enqueue_tracked(
            stream,
            None,
            &erased[..self.schema.len()],
            counts,
            Some(offsets),
        )?;
        Ok(ColumnTicket::from_core(core, self.schema.clone()))
    }

    /// [`BucketReadback::enqueue`] from raw device addresses: `counts` (its kind gives the
    /// offsets' kind too) and `offsets` hold one value per bucket.
    ///
    /// Errors as [`crate::ColumnReadback::enqueue_raw`] (`offsets` checked as the count is);
    /// from the ticket's wait as [`BucketReadback::enqueue`].
    ///
    /// # Safety
    /// As [`crate::ColumnReadback::enqueue_raw`], for the sources, the counts and the offsets.
    pub unsafe fn enqueue_raw(
        &self,
        stream: &CudaStream,
        after: Option<&CudaEvent>,
        sources: &[ColumnSource],
        counts: RawCount,
        offsets: CUdeviceptr,
    ) -> Result<ColumnTicket> {
        let slots = self.engine.slots();
        slots.check_stream(stream)?;
        let after = after.map(|e| slots.check_event(e)).transpose()?;
        // SAFETY: per the contract; the stream and event are of this context (checked).
        unsafe { self.enqueue_raw_stream(stream.cu_stream(), after, sources, counts, offsets) }
    }

    /// [`BucketReadback::enqueue_raw`] on raw driver handles, as
    /// [`crate::ColumnReadback::enqueue_raw_stream`]: the path of the C API's `srb_enqueue_buckets`.
    /// The stream is checked to belong to this readback's context, and every address to be
    /// device memory of it.
    ///
    /// # Safety
    /// As [`BucketReadback::enqueue_raw`] for the memory; `stream` (unless null) and `after`
    /// are live handles, and `after` belongs to this readback's context.
    pub unsafe fn enqueue_raw_stream(
        &self,
        stream: CUstream,
        after: Option<CUevent>,
        sources: &[ColumnSource],
        counts: RawCount,
        offsets: CUdeviceptr,
    ) -> Result<ColumnTicket> {
        let pack = Pack {
            sources,
            count: counts,
            offsets: Some(offsets),
        };
        // SAFETY: per the contract; enqueue_raw checks the stream and every address.
        let core = unsafe { self.engine.enqueue_raw(stream, after, pack)? };
        Ok(ColumnTicket::from_core(core, self.schema.clone()))
    }
}

// Compile-time proof of the thread-safety claims in the docs.
const _: () = {
    const fn send_sync<X: Send + Sync>() {}
    send_sync::<BucketReadback>();
};
