//! Readbacks inside CUDA graphs: record the pack (or an append kernel) once during stream
//! capture, replay the graph many times, and consume one fresh readback per replay.
//!
//! A graph freezes kernel parameters, so nothing that changes per replay can be a parameter.
//! A [`GraphReadback`] is *device-sequenced*: every time its pack kernel (or append kernel)
//! runs it reads a device-resident counter (the sequence number of the previous readback),
//! takes `seq = counter + 1` and `slot = (seq - 1) % slots`, and stores `seq` back when it is
//! done. The host consumes the readbacks in sequence order with [`GraphReadback::next`].
//!
//! # How the host consumes replays
//!
//! - Readback `seq` (1, 2, 3, ...) lands in slot `(seq - 1) % slots`. Its trailer is written
//!   last, after a system fence, so the host sees the new `seq` in the trailer only once the
//!   count and every column are in place: it never reads a stale slot (the trailer holds an
//!   older `seq`) or a torn one.
//! - The device writes readback `seq` only if the host has *released* readback `seq - slots`
//!   (the slot's previous occupant): a [`Replay`] holds its slot until it is dropped, and
//!   readbacks not yet taken by `next` count as held too. So up to `slots` replays may run
//!   ahead of the host; the host never loses a readback it is reading.
//! - When the host falls further behind, the kernel drops the readback (it writes nothing into
//!   the held slot) and records its number; `next` then returns [`Error::Overrun`] for each
//!   dropped `seq`, in order, and moves on. Size `slots` for the most replays the host may lag
//!   behind.
//! - Count errors ([`Error::CountExceedsCapacity`] and the others) are returned by `next` for
//!   that replay, which is then consumed; the next call moves on to the next replay. An append
//!   that overflowed ([`Error::AppendOverflow`]) keeps its slot until the next `next` call:
//!   [`GraphReadback::overflowed`] hands it out, with its first `capacity` rows and its spill.
//!
//! The readbacks of one `GraphReadback` must run one after another: record it on one stream
//! (or order the recordings with events), and launch the graphs that hold it on one stream. A
//! graph may hold several recordings (each takes its own number). Every recording of one
//! `GraphReadback` is alike: packs with the same count type and source lengths (the host
//! cannot tell which recording produced a replay, and decodes each with these), or append
//! kernels; recordings that differ need a `GraphReadback` each. Nothing but this contract ties
//! a graph to the `GraphReadback` it was recorded for: launching it after the readback is
//! dropped is undefined behaviour, which is why recording is `unsafe`.
//!
//! Programmatic dependent launch is off for these packs: one pack's counter store must be
//! visible to the next pack's load, which only a full kernel boundary guarantees.
//!
//! An append kernel that does not finish leaves no trailer and no overrun: in a graph nothing
//! tells the host that the replay is over, so `next` waits for it; use
//! [`GraphReadback::next_timeout`] where that can happen.
//!
//! # Why raw pointers
//! Recording a pack inside a capture takes device addresses that every replay reads at some
//! later time; no Rust borrow can cover that, so [`GraphReadback::record`] takes raw
//! addresses and is `unsafe`. It also avoids cudarc's event tracking, which would record and
//! wait on events in the capturing stream and tie the graph to events outside it.
use crate::append::AppendDesc;
use crate::config::ReadbackConfig;
use crate::element::Element;
use crate::engine::device::{DeviceEngine, Take};
use crate::engine::view::SlotView;
use crate::engine::Deadline;
use crate::error::{Error, Result};
use crate::info::ReadbackInfo;
use crate::layout::SlotLayout;
use crate::schema::{Column, ColumnSchema};
use crate::source::{ColumnSource, RawCount};
use crate::ticket::{ColumnReadout, ColumnTicket};
use cudarc::driver::sys::{CUdeviceptr, CUevent, CUstream};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A readback that can be recorded into a CUDA graph and replayed; see
/// [`GraphReadback::next`] for how replays are consumed. `Send` and `Sync`.
///
/// Dropping the last handle synchronizes its context (`cuCtxSynchronize`): replays record no
/// event, so only that says no replay still writes the slots it frees. Drop it while no stream
/// of the context is capturing, in any thread: the driver refuses the synchronization then, and
/// invalidates that capture.
#[derive(Debug)]
pub struct GraphReadback {
    engine: DeviceEngine,
    schema: Arc<ColumnSchema>,
    /// The overflowed append replay `next` left held, until `overflowed` or the next `next`.
    overflowed: Mutex<Option<u64>>,
}

/// One replay's readback, taken with [`GraphReadback::next`]. Holds its slot until dropped;
/// the slices it hands out borrow it, so none outlives the slot.
#[derive(Debug)]
pub struct Replay<'g> {
    graph: &'g GraphReadback,
    view: SlotView<'g>,
}

impl Replay<'_> {
    /// The count the device held (rows in every column).
    pub fn count(&self) -> usize {
        self.view.rows()
    }
    /// The replay's sequence number (1, 2, 3, ...).
    pub fn seq(&self) -> u64 {
        self.view.seq()
    }
    /// The replay's columns, for as long as the replay is borrowed.
    pub fn readout(&self) -> ColumnReadout<'_> {
        ColumnReadout::new(self.view.reborrow(), &self.graph.schema)
    }
    /// Column `c` as `count` elements of `T`; see [`ColumnReadout::column`].
    ///
    /// # Panics
    /// If `c` is the handle of another schema's column.
    pub fn column<T: Element>(&self, c: Column<T>) -> &[T] {
        self.readout().column(c)
    }
    /// Column `c`, or [`Error::SchemaMismatch`]; see [`ColumnReadout::try_column`].
    pub fn try_column<T: Element>(&self, c: Column<T>) -> Result<&[T]> {
        self.readout().try_column(c)
    }
    /// Column `index`'s bytes; see [`ColumnReadout::column_bytes`].
    pub fn column_bytes(&self, index: usize) -> Result<&[u8]> {
        self.readout().column_bytes(index)
    }

    /// For an overflowed append replay (from [`GraphReadback::overflowed`]): brings back the
    /// rows that went to the device-side spill region, on `stream`, and waits for them, so the
    /// returned ticket is complete. `None` when nothing spilled.
    ///
    /// Errors: [`Error::ForeignContext`] for a stream of another context;
    /// [`Error::StreamCapturing`]; [`Error::Cuda`] from the fetch or its wait.
    pub fn fetch_spill(&self, stream: &CudaStream) -> Result<Option<ColumnTicket>> {
        self.graph.fetch_spill(stream, self.view.seq())
    }
}

impl Drop for Replay<'_> {
    fn drop(&mut self) {
        self.graph.engine.release(self.view.seq());
    }
}

/// A replay taken with [`GraphReadback::take`]. Like a [`Replay`] it holds its slot until
/// dropped, but it holds its readback by `Arc` instead of borrowing it, so it can be kept where
/// no borrow reaches: a binding's table of held replays, a Python object.
#[derive(Debug)]
pub struct OwnedReplay {
    graph: Arc<GraphReadback>,
    seq: u64,
    rows: usize,
}

impl OwnedReplay {
    /// The rows in the slot (the count; an overflowed append: the capacity).
    pub fn count(&self) -> usize {
        self.rows
    }
    /// The replay's sequence number (1, 2, 3, ...).
    pub fn seq(&self) -> u64 {
        self.seq
    }
    /// The replay's columns, for as long as the replay is borrowed.
    pub fn readout(&self) -> ColumnReadout<'_> {
        ColumnReadout::new(
            self.graph.engine.view(self.seq, self.rows),
            &self.graph.schema,
        )
    }
    /// For an overflowed append replay: brings back the rows that went to the device-side
    /// spill region, as [`Replay::fetch_spill`].
    pub fn fetch_spill(&self, stream: &CudaStream) -> Result<Option<ColumnTicket>> {
        self.graph.fetch_spill(stream, self.seq)
    }
    /// [`OwnedReplay::fetch_spill`] on a raw driver stream (a `CUstream` made by other code;
    /// null is the legacy default stream), checked to belong to the readback's context: the
    /// path of the C API's `srb_fetch_spill`.
    ///
    /// # Safety
    /// `stream` is a live stream handle or null.
    pub unsafe fn fetch_spill_raw_stream(&self, stream: CUstream) -> Result<Option<ColumnTicket>> {
        // SAFETY: per the contract; then the stream is of this context.
        unsafe {
            self.graph.engine.slots().check_raw_stream(stream)?;
            self.graph.fetch_spill_raw(stream, self.seq)
        }
    }
}

impl Drop for OwnedReplay {
    fn drop(&mut self) {
        self.graph.engine.release(self.seq);
    }
}

/// What [`GraphReadback::take`] took: the next replay's number and outcome, and, while its
/// slot holds rows, the replay itself.
#[derive(Debug)]
#[non_exhaustive]
pub struct Taken {
    /// The replay's sequence number; after a timeout, the number waited for.
    pub seq: u64,
    /// Its count, or its error: [`Error::Timeout`] consumes nothing; every other error
    /// ([`Error::Overrun`], the count's errors, [`Error::AppendOverflow`], [`Error::Cuda`])
    /// consumes the replay, as [`GraphReadback::next`] does.
    pub result: Result<usize>,
    /// The replay, holding its slot until dropped: with a count, and after an
    /// [`Error::AppendOverflow`] (its first `capacity` rows and its spill); else `None`.
    pub replay: Option<OwnedReplay>,
}

impl GraphReadback {
    /// A graph readback of the columns of `schema`. `config.transport` must be
    /// [`crate::Transport::Mapped`] (the default) and `config.wait` not `Event`; the slot
    /// count bounds how far replays may run ahead of the host. `config.spill` sizes the spill
    /// region of append kernels (none for `Some(0)`).
    ///
    /// Errors: [`Error::InvalidConfig`] as [`crate::ColumnReadback::new`], and for the staged
    /// transport, [`crate::WaitMode::Event`], programmatic launch, more than one bucket, or a
    /// spill region too large; [`Error::SizedCopyUnavailable`] for
    /// [`crate::StagedCopy::Sized`] (the mapped transport copies nothing);
    /// [`Error::UnsupportedDevice`] below compute capability 7.0; [`Error::Cuda`] if the
    /// driver cannot allocate the slots or load the kernel.
    pub fn new(
        ctx: &Arc<CudaContext>,
        schema: &ColumnSchema,
        config: ReadbackConfig,
    ) -> Result<Self> {
        schema.validate()?;
        let plan = DeviceEngine::plan(&schema.elem_sizes(), &config)?;
        Ok(GraphReadback {
            engine: DeviceEngine::new(ctx, plan)?,
            schema: Arc::new(schema.clone()),
            overflowed: Mutex::new(None),
        })
    }

    /// The checks [`GraphReadback::new`] makes before it touches the driver (the transport,
    /// the wait mode, the spill region's size among them), as [`crate::ColumnReadback::check`].
    ///
    /// Errors: [`Error::InvalidConfig`] and [`Error::SizedCopyUnavailable`], as
    /// [`GraphReadback::new`].
    pub fn check(schema: &ColumnSchema, config: &ReadbackConfig) -> Result<()> {
        schema.validate()?;
        DeviceEngine::plan(&schema.elem_sizes(), config).map(drop)
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
    /// Rows one slot holds.
    #[deprecated(since = "0.2.0", note = "use `info().capacity`")]
    pub fn capacity(&self) -> usize {
        self.engine.slots().layout().capacity()
    }
    /// Number of slots: how many replays may run ahead of the host.
    #[deprecated(since = "0.2.0", note = "use `info().slots`")]
    pub fn slots(&self) -> usize {
        self.engine.slots().num_slots()
    }
    /// The slot layout.
    #[deprecated(since = "0.2.0", note = "use `info().layout`")]
    pub fn layout(&self) -> &SlotLayout {
        self.engine.slots().layout()
    }
    /// The context.
    #[deprecated(since = "0.2.0", note = "use `info().context`")]
    pub fn context(&self) -> &Arc<CudaContext> {
        self.engine.slots().context()
    }
    /// The sequence number [`GraphReadback::next`] returns next (from 1).
    pub fn next_seq(&self) -> u64 {
        self.engine.next_seq()
    }
    /// Device address of the `u64` sequence counter: the number of the newest finished
    /// readback. Kernels recorded before a pack may read it (`counter + 1` is that pack's
    /// number); only the library's kernels write it.
    pub fn device_counter(&self) -> CUdeviceptr {
        self.engine.counter_ptr()
    }
    /// The newest sequence number the device dropped for lack of a released slot (0: none).
    pub fn last_overrun(&self) -> u64 {
        self.engine.overrun_seq()
    }

    /// Records one pack of `sources` (`sources[i]` is column `i`) sized by `count`, on
    /// `stream`, after `after` if given. Call it while `stream` is being captured (the pack
    /// becomes a node of the graph, run on every replay); on a stream that is not capturing,
    /// the pack runs once, like an enqueue, and is consumed the same way.
    ///
    /// Errors as an enqueue's: wrong number of columns ([`Error::SchemaMismatch`]), a null or
    /// misaligned count ([`Error::BadPointer`]), a stream or event of another context
    /// ([`Error::ForeignContext`]), a driver error ([`Error::Cuda`], e.g. from the capture); [`Error::RecordingMismatch`] when the count type or a source length differs
    /// from an earlier recording's, or append kernels were recorded. Nothing is recorded then.
    ///
    /// # Safety
    /// For every run of the pack (every replay of the graph):
    /// - `sources[i].ptr` addresses at least `sources[i].len` elements of column `i`'s type,
    ///   and `count` one naturally aligned count of its kind, in device memory of this
    ///   context, allocated and not written while the pack runs (order the writers with the
    ///   capture's streams);
    /// - this `GraphReadback` outlives it: do not launch the graph after dropping it (its
    ///   drop waits for the context's work);
    /// - the readbacks of this `GraphReadback` run one at a time (module documentation).
    pub unsafe fn record(
        &self,
        stream: &CudaStream,
        after: Option<&CudaEvent>,
        sources: &[ColumnSource],
        count: RawCount,
    ) -> Result<()> {
        let slots = self.engine.slots();
        slots.check_stream(stream)?;
        let after = after.map(|e| slots.check_event(e)).transpose()?;
        // SAFETY: per the contract; the stream and event are of this context (checked).
        unsafe { self.record_raw_stream(stream.cu_stream(), after, sources, count) }
    }

    /// [`GraphReadback::record`] with raw driver handles (the C API's path, and that of
    /// bindings whose streams are not cudarc's, e.g. a Python framework's capture stream). The
    /// stream is checked to belong to this context; addresses are not (a capture may use
    /// memory the driver only allocates at instantiation).
    ///
    /// # Safety
    /// As [`GraphReadback::record`]; `stream` and `after` are live handles of this context.
    pub unsafe fn record_raw_stream(
        &self,
        stream: CUstream,
        after: Option<CUevent>,
        sources: &[ColumnSource],
        count: RawCount,
    ) -> Result<()> {
        // SAFETY: per the contract.
        unsafe { self.engine.record_pack(stream, after, sources, count) }
    }

    /// The descriptor for append kernels recorded into graphs with this readback: the same
    /// value serves every recording and every replay (the kernel takes its sequence number
    /// and slot on the device). Marks this readback as filled by append kernels.
    ///
    /// Errors: [`Error::RecordingMismatch`] when packs were recorded.
    pub fn append_desc(&self) -> Result<AppendDesc> {
        self.engine.append_desc().map(AppendDesc::new)
    }

    /// Blocks until the next replay's readback is there, and returns it. Its slot stays
    /// held (the device will not overwrite it) until the [`Replay`] is dropped.
    ///
    /// Errors: [`Error::Overrun`] when this replay was dropped because the host had fallen
    /// more than `slots` behind; the count's errors for this replay (a pack's
    /// [`Error::NegativeCount`], [`Error::CountExceedsCapacity`], [`Error::CountExceedsSource`],
    /// in that order of precedence, as [`crate::ColumnTicket::wait`]: a count above both the
    /// capacity and a source's length is `CountExceedsCapacity`; an append kernel's
    /// [`Error::AppendMisuse`]); [`Error::AppendOverflow`] (see [`GraphReadback::overflowed`]);
    /// [`Error::CorruptTrailer`] if the slot does not hold this replay (a bug or memory
    /// corruption); [`Error::Cuda`] when the device reports an error (e.g. a faulted kernel),
    /// never a hang on a dead context. Each of these consumes the replay; the next call waits
    /// for the following one. [`Error::NothingRecorded`], at once and consuming nothing, when
    /// nothing was recorded yet.
    pub fn next(&self) -> Result<Replay<'_>> {
        self.next_until(None)
    }

    /// Like [`GraphReadback::next`], giving up with [`Error::Timeout`] after `timeout` (also
    /// when another thread is taking a replay all that time); a timeout consumes nothing. A
    /// timeout too large to add to the current time (e.g. `Duration::MAX`) means no limit.
    /// Other errors as [`GraphReadback::next`].
    pub fn next_timeout(&self, timeout: Duration) -> Result<Replay<'_>> {
        self.next_until(Deadline::after(timeout))
    }

    /// The next replay's readback if it is there, `None` if not yet or if another thread is
    /// taking a replay right now. Never blocks. Errors as [`GraphReadback::next`].
    pub fn try_next(&self) -> Result<Option<Replay<'_>>> {
        self.release_overflowed();
        match self.engine.take(Deadline::after(Duration::ZERO))? {
            Take::Busy(_) | Take::Seq(_, Err(Error::Timeout { .. })) => Ok(None),
            Take::Seq(seq, result) => self.outcome(seq, result).map(Some),
        }
    }

    /// Takes the next replay as [`GraphReadback::next_timeout`] does (`None`: no time limit;
    /// `Some(Duration::ZERO)`: just look), reporting its sequence number with every outcome,
    /// for bindings that address replays by number (the C API's `srb_next`). The replay comes
    /// as an [`OwnedReplay`], which holds this readback by `Arc`.
    ///
    /// Returns `Ok(None)` when another thread was taking a replay for the whole timeout
    /// (nothing consumed). Errors: [`Error::NothingRecorded`], at once and consuming nothing.
    /// The replay's own errors, [`Error::Timeout`] among them, come in [`Taken::result`], as
    /// [`GraphReadback::next_timeout`] returns them.
    /// An append replay that a `next` call left for [`GraphReadback::overflowed`] is released
    /// first, as by `next`.
    pub fn take(self: &Arc<Self>, timeout: Option<Duration>) -> Result<Option<Taken>> {
        self.release_overflowed();
        let deadline = timeout.and_then(Deadline::after);
        let (seq, result) = match self.engine.take(deadline)? {
            Take::Busy(_) => return Ok(None),
            Take::Seq(seq, result) => (seq, result),
        };
        let capacity = self.engine.slots().layout().capacity();
        let held = match &result {
            Ok((_, rows)) => Some(*rows),
            Err(Error::AppendOverflow { .. }) => Some(capacity),
            Err(_) => None,
        };
        Ok(Some(Taken {
            seq,
            result: result.map(|(_, rows)| rows),
            replay: held.map(|rows| OwnedReplay {
                graph: self.clone(),
                seq,
                rows,
            }),
        }))
    }

    /// The append replay for which the last `next` (or `try_next`) returned
    /// [`Error::AppendOverflow`]: its first `capacity` rows, and its spill
    /// ([`Replay::fetch_spill`]). `None` if that call returned something else, or the replay
    /// was already handed out. The next `next` releases it if it was not taken.
    pub fn overflowed(&self) -> Option<Replay<'_>> {
        let seq = self
            .overflowed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()?;
        let view = self.engine.held_view(seq)?;
        Some(Replay { graph: self, view })
    }

    fn release_overflowed(&self) {
        let pending = self
            .overflowed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(seq) = pending {
            self.engine.release(seq);
        }
    }

    fn next_until(&self, deadline: Option<Deadline>) -> Result<Replay<'_>> {
        self.release_overflowed();
        match self.engine.take(deadline)? {
            Take::Busy(timeout) => Err(timeout),
            Take::Seq(seq, result) => self.outcome(seq, result),
        }
    }

    fn outcome(&self, seq: u64, result: Result<(usize, usize)>) -> Result<Replay<'_>> {
        match result {
            Ok(_) => {
                let view = self
                    .engine
                    .held_view(seq)
                    .expect("a replay just taken is held");
                Ok(Replay { graph: self, view })
            }
            Err(e @ Error::AppendOverflow { .. }) => {
                *self.overflowed.lock().unwrap_or_else(|p| p.into_inner()) = Some(seq);
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Brings back the spilled rows of replay `seq`, which the caller holds (a [`Replay`] or
    /// an [`OwnedReplay`]), waiting for them.
    fn fetch_spill(&self, stream: &CudaStream, seq: u64) -> Result<Option<ColumnTicket>> {
        self.engine.slots().check_stream(stream)?;
        // SAFETY: the stream is live and of this context (checked).
        unsafe { self.fetch_spill_raw(stream.cu_stream(), seq) }
    }

    /// [`Self::fetch_spill`] on a raw stream.
    ///
    /// # Safety
    /// `stream` is a live stream of this readback's context.
    unsafe fn fetch_spill_raw(&self, stream: CUstream, seq: u64) -> Result<Option<ColumnTicket>> {
        debug_assert!(self.engine.held_view(seq).is_some(), "the caller holds it");
        // SAFETY: per the contract; the caller holds replay `seq`, and the fetch is waited for
        // below, before the caller can release it.
        let Some(core) = (unsafe { self.engine.fetch_spill(stream, seq)? }) else {
            return Ok(None);
        };
        let ticket = ColumnTicket::from_core(core, self.schema.clone());
        match ticket.wait() {
            Ok(_) | Err(Error::CountExceedsCapacity { .. }) => {}
            Err(e) => return Err(e),
        }
        Ok(Some(ticket))
    }
}

// Compile-time proof of the thread-safety claims in the docs.
const _: () = {
    const fn send_sync<X: Send + Sync>() {}
    send_sync::<GraphReadback>();
    send_sync::<OwnedReplay>();
};
