//! Several columns, one count: structure-of-arrays readback.
//!
//! A particle's position, velocity and id live in separate device arrays that share one
//! device-resident count. A [`ColumnReadback`] reads all of them back in one enqueue: one pack
//! kernel launch, one slot, one trailer. Columns may have different element types; the host
//! view gives each one as a typed slice.
//!
//! Declare the columns on a [`ColumnSchema`]; each declaration returns a typed handle
//! ([`Column<T>`](crate::Column)) that binds a device buffer of that type at enqueue time and
//! reads the column back as `&[T]`, so a type mismatch is a compile error rather than a runtime
//! one:
//!
//! ```no_run
//! use sized_readback::{ColumnReadback, ColumnSchema, ReadbackConfig};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = sized_readback::device::open(0)?;
//! let stream = ctx.new_stream()?;
//! let cap = 1 << 20;
//! let d_pos = stream.alloc_zeros::<[f64; 3]>(cap)?;   // a kernel fills pos[..n], id[..n]
//! let d_id = stream.alloc_zeros::<i32>(cap)?;
//! let d_n = stream.alloc_zeros::<i32>(1)?;            // ...and writes n here
//!
//! let mut schema = ColumnSchema::new();
//! let pos = schema.column::<[f64; 3]>();
//! let id = schema.column::<i32>();
//! let rb = ColumnReadback::new(&ctx, &schema, ReadbackConfig::new(cap))?;
//!
//! let ticket = rb.enqueue(&stream, &[pos.source(&d_pos), id.source(&d_id)], &d_n)?;
//! let out = ticket.wait()?;
//! let (p, i): (&[[f64; 3]], &[i32]) = (out.column(pos), out.column(id));
//! assert_eq!((p.len(), i.len()), (out.count(), out.count()));
//! # Ok(()) }
//! ```
//!
//! The capacity, overflow and bad-input rules are the single-column ones, applied to every
//! column: a count above the capacity ([`Error::CountExceedsCapacity`]), a negative count
//! ([`Error::NegativeCount`]) or a count above any column's source length
//! ([`Error::CountExceedsSource`], naming the first short column) copies nothing.
use crate::auto;
use crate::config::{ReadbackConfig, StagedCopy, Transport, WaitMode};
use crate::element::CountType;
use crate::engine::host::HostEngine;
use crate::engine::pack_params::Pack;
use crate::engine::plan::SlotPlan;
use crate::engine::ticket::{Observed, TicketCore};
use crate::engine::tracked::ErasedDevicePtr;
use crate::error::{Error, Result};
use crate::info::ReadbackInfo;
use crate::launch::LaunchShape;
use crate::layout::{BucketTable, SlotLayout};
use crate::schema::{ColumnSchema, Source};
use crate::source::{ColumnSource, RawCount};
use crate::ticket::ColumnTicket;
use cudarc::driver::sys::{CUevent, CUstream};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream, DevicePtr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

/// Reads back several device arrays that share one device-resident count, in one kernel
/// launch, into one slot with one trailer. `Send` and `Sync`, like [`crate::Readback`].
#[derive(Debug)]
pub struct ColumnReadback {
    sets: RwLock<Arc<Sets>>,
    schema: Arc<ColumnSchema>,
    /// [`Transport::Auto`]: the count a wait last read back (it chooses the next enqueue's
    /// set), and the readback's numbering across both sets.
    last_count: Arc<AtomicUsize>,
    next_seq: AtomicU64,
}

/// A readback's slot sets: one, or under [`Transport::Auto`] the mapped set (`first`) and,
/// where a count within the capacity can reach [`auto::staged_from`], a staged one.
#[derive(Debug)]
struct Sets {
    first: Arc<HostEngine>,
    /// Auto: the staged set and the count from which an enqueue goes to it.
    staged: Option<(Arc<HostEngine>, usize)>,
    /// The settings as given (Auto unresolved), for `grow`.
    config: ReadbackConfig,
}

/// The plans of a readback's slot sets (see [`Sets`]): checked together before any is made.
struct SetPlans {
    first: SlotPlan,
    staged: Option<(SlotPlan, usize)>,
}

impl SetPlans {
    fn new(schema: &ColumnSchema, config: &ReadbackConfig) -> Result<Self> {
        schema.validate()?;
        if config.buckets != 1 {
            return Err(Error::config(format!(
                "{} buckets on a readback of one bucket: only bucket-pack readbacks and append \
                 readbacks have buckets",
                config.buckets
            )));
        }
        let sizes = schema.elem_sizes();
        let plan =
            |cfg: &ReadbackConfig| HostEngine::plan_packs(&sizes, cfg, BucketTable::IfBucketed);
        if config.transport != Transport::Auto {
            return Ok(SetPlans {
                first: plan(config)?,
                staged: None,
            });
        }
        // The mapped set copies nothing, whatever `staged_copy` says (it is the staged set's);
        // the staged set waits on its event (a DMA lands in no guaranteed byte order).
        let mut mapped = config.clone().transport(Transport::Mapped);
        mapped.staged_copy = StagedCopy::Auto;
        let first = plan(&mapped)?;
        let mut staged = config.clone().transport(Transport::Staged);
        if staged.wait == WaitMode::Trailer {
            staged.wait = WaitMode::Auto;
        }
        // The staged set serves counts that nearly fill the slot, where the sized copy would
        // take its top class anyway: the whole-slot copy by the copy engine moves those bytes
        // faster than the SWITCH body's copy, which the driver runs as a kernel (auto.rs).
        if staged.staged_copy == StagedCopy::Auto {
            staged.staged_copy = StagedCopy::Whole;
        }
        // Checked whether or not this capacity makes the set, so that settings `new` accepts
        // are not refused by a `grow` that reaches the threshold.
        let staged_plan = plan(&staged)?;
        let staged = auto::staged_from(config.capacity, first.layout.row_bytes())
            .map(|from| (staged_plan, from));
        Ok(SetPlans { first, staged })
    }

    fn make(self, ctx: &Arc<CudaContext>, config: ReadbackConfig) -> Result<Sets> {
        let first = HostEngine::packs(ctx, self.first)?;
        let staged = match self.staged {
            Some((plan, from)) => Some((HostEngine::packs(ctx, plan)?, from)),
            None => None,
        };
        Ok(Sets {
            first,
            staged,
            config,
        })
    }
}

impl Sets {
    /// The set the last count read back chooses, then the other one (if any).
    fn order(&self, last_count: usize) -> (&Arc<HostEngine>, Option<&Arc<HostEngine>>) {
        match &self.staged {
            Some((staged, from)) if last_count >= *from => (staged, Some(&self.first)),
            Some((staged, _)) => (&self.first, Some(staged)),
            None => (&self.first, None),
        }
    }
}

impl ColumnReadback {
    /// A readback of the columns of `schema`, `config.capacity` rows per slot.
    ///
    /// Errors: [`Error::InvalidConfig`] for no columns or more than [`crate::MAX_COLUMNS`], a zero
    /// capacity or slot count, an element aligned to more than 16 bytes, sizes that overflow,
    /// more than one bucket, a spill, or settings that do not go together;
    /// [`Error::SizedCopyUnavailable`] for [`crate::StagedCopy::Sized`] where the driver or the
    /// settings cannot have it (the mapped transport, a driver older than CUDA 12.8,
    /// programmatic launch asked for; `Auto` takes the whole-slot copy instead);
    /// [`Error::UnsupportedDevice`] below compute capability 7.0; [`Error::Cuda`] if the driver
    /// cannot allocate the slots or load the kernel.
    pub fn new(
        ctx: &Arc<CudaContext>,
        schema: &ColumnSchema,
        config: ReadbackConfig,
    ) -> Result<Self> {
        let sets = SetPlans::new(schema, &config)?.make(ctx, config)?;
        Ok(ColumnReadback {
            sets: RwLock::new(Arc::new(sets)),
            schema: Arc::new(schema.clone()),
            last_count: Arc::new(AtomicUsize::new(0)),
            next_seq: AtomicU64::new(0),
        })
    }

    /// The checks [`ColumnReadback::new`] makes before it touches the driver: the schema, the
    /// settings and the size of the slots. For bindings that report bad settings alike with or
    /// without a GPU.
    ///
    /// Errors: [`Error::InvalidConfig`] and [`Error::SizedCopyUnavailable`] for settings, as
    /// [`ColumnReadback::new`] (a driver too old for the sized copy shows at `new` only).
    pub fn check(schema: &ColumnSchema, config: &ReadbackConfig) -> Result<()> {
        SetPlans::new(schema, config).map(drop)
    }

    fn sets(&self) -> Arc<Sets> {
        self.sets.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The slot set every setting but the transport's describes: the only one, or the mapped
    /// set of [`Transport::Auto`].
    pub(crate) fn engine(&self) -> Arc<HostEngine> {
        self.sets().first.clone()
    }

    /// The columns.
    pub fn schema(&self) -> &ColumnSchema {
        &self.schema
    }
    /// The readback's settings in effect and its slot layout, in one value: the one place to
    /// read them.
    pub fn info(&self) -> ReadbackInfo {
        let sets = self.sets();
        let mut info = sets.first.info();
        if let Some((staged, from)) = &sets.staged {
            info.staged_copy = staged.slots().staged_copy();
            info.auto_staged_from = Some(*from);
        }
        if sets.config.transport == Transport::Auto {
            info.transport = Transport::Auto;
        }
        info
    }
    /// Rows (elements of every column) one slot holds.
    #[deprecated(since = "0.2.0", note = "use `info().capacity`")]
    pub fn capacity(&self) -> usize {
        self.engine().slots().layout().capacity()
    }
    /// Number of slots.
    #[deprecated(since = "0.2.0", note = "use `info().slots`")]
    pub fn slots(&self) -> usize {
        self.engine().slots().num_slots()
    }
    /// Slots currently held by tickets: live state, not a setting, so not in
    /// [`ColumnReadback::info`].
    pub fn slots_in_use(&self) -> usize {
        let sets = self.sets();
        sets.first.held() + sets.staged.as_ref().map_or(0, |(s, _)| s.held())
    }
    /// The transport.
    #[deprecated(since = "0.2.0", note = "use `info().transport`")]
    pub fn transport(&self) -> Transport {
        self.info().transport
    }
    /// The wait mode in effect (never `Auto`).
    #[deprecated(since = "0.2.0", note = "use `info().wait_mode`")]
    pub fn wait_mode(&self) -> WaitMode {
        self.engine().slots().wait_mode()
    }
    /// The slot layout (one region per column, then the trailer).
    #[deprecated(since = "0.2.0", note = "use `info().layout`")]
    pub fn layout(&self) -> SlotLayout {
        self.engine().slots().layout().clone()
    }
    /// The pack kernel's launch shape (grid from the capacity, block, programmatic launch).
    #[deprecated(since = "0.2.0", note = "use `info().launch_shape`")]
    pub fn launch_shape(&self) -> LaunchShape {
        self.engine().slots().launch_shape()
    }
    /// The context.
    #[deprecated(since = "0.2.0", note = "use `info().context`")]
    pub fn context(&self) -> Arc<CudaContext> {
        self.engine().context().clone()
    }

    /// Replaces the slots with ones of `capacity` rows, keeping the other settings. Tickets
    /// already handed out keep the old slots alive until they are dropped; enqueues racing
    /// with it on other threads use the old slots or the new. Use after
    /// [`Error::CountExceedsCapacity`]: the device data is untouched, so enqueue again.
    ///
    /// Errors as [`ColumnReadback::new`]; after one the readback keeps its old slots.
    pub fn grow(&self, capacity: usize) -> Result<()> {
        let old = self.sets();
        let mut config = old.config.clone();
        config.capacity = capacity;
        let new = SetPlans::new(&self.schema, &config)?.make(old.first.context(), config)?;
        *self.sets.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(new);
        Ok(())
    }

    /// Enqueues a readback of `count` rows of every column on `stream`, after the work
    /// already in it. `sources` binds each column exactly once, in any order. Returns at once.
    ///
    /// cudarc's event tracking orders the kernel after earlier cudarc writes to the buffers
    /// and later cudarc writes after this read. With tracking disabled
    /// (`CudaContext::disable_event_tracking`), the caller orders them: nothing may write the
    /// buffers or free them until the ticket's readback is complete unless it is enqueued on
    /// `stream` after this call.
    ///
    /// Errors: [`Error::SchemaMismatch`] when a column is missing, bound twice, bound with a
    /// handle of another schema, or bound to a buffer of another element type than the
    /// readback declares for it (checked before any driver call); [`Error::ForeignContext`]
    /// when a buffer or the stream belongs to another context; [`Error::BufferTooShort`] for
    /// an empty count buffer; [`Error::StreamCapturing`]; [`Error::SlotsExhausted`] when every
    /// slot is held; [`Error::Cuda`] on a driver error. The count's own errors come from the
    /// ticket's wait ([`ColumnTicket::wait`], which states their order).
    pub fn enqueue<C, K>(
        &self,
        stream: &CudaStream,
        sources: &[Source<'_>],
        count: &C,
    ) -> Result<ColumnTicket>
    where
        C: DevicePtr<K>,
        K: CountType,
    {
        // The element types first: a buffer's length counts elements of the column's size
        // only if it holds the column's type.
        let erased = self.schema.bind_erased(sources)?;
        self.enqueue_erased(stream, None, &erased[..self.schema.len()], count)
    }

    /// Like [`ColumnReadback::enqueue`], but the readback also waits for `after` (an event
    /// recorded after the producer on another stream).
    ///
    /// Errors as [`ColumnReadback::enqueue`] ([`Error::ForeignContext`] for an event of another
    /// context too).
    pub fn enqueue_after<C, K>(
        &self,
        stream: &CudaStream,
        after: &CudaEvent,
        sources: &[Source<'_>],
        count: &C,
    ) -> Result<ColumnTicket>
    where
        C: DevicePtr<K>,
        K: CountType,
    {
        let erased = self.schema.bind_erased(sources)?;
        self.enqueue_erased(stream, Some(after), &erased[..self.schema.len()], count)
    }

    /// The safe enqueue of every column readback ([`crate::Readback`] too): `sources[i]`,
    /// whose element type was checked, is column `i`.
    pub(crate) fn enqueue_erased<C, K>(
        &self,
        stream: &CudaStream,
        after: Option<&CudaEvent>,
        sources: &[&dyn ErasedDevicePtr],
        count: &C,
    ) -> Result<ColumnTicket>
    where
        C: DevicePtr<K>,
        K: CountType,
    {
        let sets = self.sets();
        let (first, second) = sets.order(self.last_count.load(Ordering::Relaxed));
        // The other set only where every slot of the first is held: the common path calls the
        // engine directly.
        let core = or_other_set(
            first.enqueue_tracked(stream, after, sources, count, None::<&C>),
            second,
            |engine| engine.enqueue_tracked(stream, after, sources, count, None::<&C>),
        )?;
        Ok(self.ticket(core))
    }

    /// Enqueues a readback from raw device addresses (`sources[i]` is column `i`), for
    /// buffers owned by C/C++ code or written by kernels cudarc does not track.
    ///
    /// `after` marks the producer done; pass `None` only if the producer ran on `stream`.
    /// Each address is checked to be device memory of this context.
    ///
    /// Errors: [`Error::SchemaMismatch`] for another number of sources than columns;
    /// [`Error::BadPointer`] for a null, misaligned or unknown address;
    /// [`Error::ForeignContext`] for memory, a stream or an event of another context;
    /// [`Error::StreamCapturing`]; [`Error::SlotsExhausted`]; [`Error::Cuda`]. The count's
    /// own errors come from the ticket's wait.
    ///
    /// # Safety
    /// - `sources[i].ptr` addresses at least `sources[i].len` elements of column `i`'s type,
    ///   and `count` one naturally aligned count of its kind, in device memory of this context;
    /// - they stay allocated and unwritten until the readback completes; work that writes
    ///   them next is ordered after it (e.g. enqueued on `stream`);
    /// - `after`, if given, belongs to this context.
    pub unsafe fn enqueue_raw(
        &self,
        stream: &CudaStream,
        after: Option<&CudaEvent>,
        sources: &[ColumnSource],
        count: RawCount,
    ) -> Result<ColumnTicket> {
        let engine = self.engine();
        engine.slots().check_stream(stream)?;
        let after = after.map(|e| engine.slots().check_event(e)).transpose()?;
        // SAFETY: per the contract; the stream and event are of this context (checked).
        unsafe { self.enqueue_raw_stream(stream.cu_stream(), after, sources, count) }
    }

    /// [`ColumnReadback::enqueue_raw`] on raw driver handles: `stream` is a `CUstream` (a
    /// runtime `cudaStream_t`) made by other code, such as a Python framework's current
    /// stream, and `after` a `CUevent`; null `stream` is the legacy default stream. This is
    /// the path of the C API's `srb_enqueue`, for bindings that hold driver handles rather
    /// than cudarc streams: the stream is checked to belong to this readback's context, and
    /// every address to be device memory of it.
    ///
    /// Errors as [`ColumnReadback::enqueue_raw`].
    ///
    /// # Safety
    /// As [`ColumnReadback::enqueue_raw`] for the memory; `stream` (unless null) and `after`
    /// are live handles, and `after` belongs to this readback's context.
    pub unsafe fn enqueue_raw_stream(
        &self,
        stream: CUstream,
        after: Option<CUevent>,
        sources: &[ColumnSource],
        count: RawCount,
    ) -> Result<ColumnTicket> {
        let pack = Pack {
            sources,
            count,
            offsets: None,
        };
        let sets = self.sets();
        let (first, second) = sets.order(self.last_count.load(Ordering::Relaxed));
        let core = or_other_set(
            // SAFETY: per the contract; enqueue_raw checks the stream and every address.
            unsafe { first.enqueue_raw(stream, after, pack) },
            second,
            // SAFETY: as above, on the other set.
            |engine| unsafe { engine.enqueue_raw(stream, after, pack) },
        )?;
        Ok(self.ticket(core))
    }

    /// The transport of the slots the next enqueue tries first: the readback's, or under
    /// [`Transport::Auto`] the set the count read back last chooses (the other set takes the
    /// enqueue where every slot of that one is held).
    pub fn next_transport(&self) -> Transport {
        let sets = self.sets();
        let (first, _) = sets.order(self.last_count.load(Ordering::Relaxed));
        first.transport()
    }

    /// The ticket of `core`, numbered by the readback (from 1, across both sets of
    /// [`Transport::Auto`] and across `grow`, whose new slots number their own from 1 again),
    /// and observed: its wait leaves the count it read back for the next enqueue's choice.
    fn ticket(&self, core: TicketCore) -> ColumnTicket {
        let core = core.observed(Observed {
            seq: self.next_seq.fetch_add(1, Ordering::Relaxed) + 1,
            last_count: self.last_count.clone(),
        });
        ColumnTicket::from_core(core, self.schema.clone())
    }
}

/// `first`, the enqueue on the set the last count chose; where every slot of that set was held
/// and there is a `second` set, `enqueue` on it (its error only if it is not the same).
fn or_other_set(
    first: Result<TicketCore>,
    second: Option<&Arc<HostEngine>>,
    enqueue: impl FnOnce(&Arc<HostEngine>) -> Result<TicketCore>,
) -> Result<TicketCore> {
    match (first, second) {
        (Err(e @ Error::SlotsExhausted { .. }), Some(second)) => match enqueue(second) {
            Err(Error::SlotsExhausted { .. }) => Err(e),
            other => other,
        },
        (result, _) => result,
    }
}

// Compile-time proof of the thread-safety claims in the docs.
const _: () = {
    const fn send_sync<X: Send + Sync>() {}
    send_sync::<ColumnReadback>();
};

#[cfg(test)]
mod tests {
    use super::*;

    fn one_f64() -> ColumnSchema {
        let mut s = ColumnSchema::new();
        s.column::<f64>();
        s
    }

    /// Under Auto the staged set's settings are checked whatever the capacity: settings a
    /// small readback accepts are not refused by a grow that reaches the staged threshold.
    #[test]
    fn auto_checks_the_staged_set_at_every_capacity() {
        let bad = |cap| {
            ReadbackConfig::new(cap)
                .transport(Transport::Auto)
                .staged_copy(crate::StagedCopy::Sized)
                .programmatic_launch(true)
        };
        for cap in [1000, 16 << 20] {
            let e = ColumnReadback::check(&one_f64(), &bad(cap)).unwrap_err();
            assert!(
                matches!(e, Error::SizedCopyUnavailable { .. }),
                "{cap}: {e:?}"
            );
        }
        let auto = |cap| ReadbackConfig::new(cap).transport(Transport::Auto);
        for cap in [1000, 1 << 20] {
            let plans = SetPlans::new(&one_f64(), &auto(cap)).unwrap();
            assert!(
                plans.staged.is_none(),
                "{cap}: no staged set below the threshold"
            );
        }
        let plans = SetPlans::new(&one_f64(), &auto(16 << 20)).unwrap();
        assert_eq!(plans.staged.map(|(_, from)| from), Some(16 << 20));
    }
}
