//! Readbacks inside CUDA graphs: record the pack once during stream capture, replay the graph
//! many times, and consume one fresh readback per replay.
//!
//! A graph freezes kernel parameters, so nothing that changes per replay can be a parameter.
//! A [`GraphReadback`] is *device-sequenced*: every time its pack kernel runs it reads a
//! device-resident counter (the sequence number of the previous pack), takes `seq = counter +
//! 1` and `slot = (seq - 1) % slots`, and stores `seq` back when it is done. The host
//! consumes the readbacks in sequence order with [`GraphReadback::next`].
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
//! - When the host falls further behind, the pack drops the readback (it writes nothing into
//!   the held slot) and records its number; `next` then returns [`Error::Overrun`] for each
//!   dropped `seq`, in order, and moves on. Size `slots` for the most replays the host may
//!   lag behind.
//! - Count errors ([`Error::CountExceedsCapacity`] and the others) are returned by `next` for
//!   that replay, which is then consumed; the next call moves on to the next replay.
//!
//! The packs of one `GraphReadback` must run one after another: record it on one stream (or
//! order the recordings with events), and launch the graphs that hold it on one stream. A
//! graph may hold several recordings (each takes its own number). Every recording of one
//! `GraphReadback` uses the same count type and the same source lengths (the host cannot
//! tell which recording produced a replay, and decodes each with these); recordings that
//! differ need a `GraphReadback` each.
//!
//! Programmatic dependent launch is off for these packs: one pack's counter store must be
//! visible to the next pack's load, which only a full kernel boundary guarantees.
//!
//! # Why raw pointers
//! Recording a pack inside a capture takes device addresses that every replay reads at some
//! later time; no Rust borrow can cover that, so [`GraphReadback::record`] takes raw
//! addresses and is `unsafe`. It also avoids cudarc's event tracking, which would record
//! and wait on events in the capturing stream and tie the graph to events outside it.
use crate::columns::{ColumnReadout, ColumnSchema};
use crate::element::{CountKind, CountType};
use crate::error::{Error, Result};
use crate::layout::{decode_trailer, SlotLayout};
use crate::readback::{ColumnSource, DeviceSeq, Engine, ReadbackConfig};
use cudarc::driver::sys::{CUdeviceptr, CUevent, CUstream};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

/// A readback that can be recorded into a CUDA graph and replayed; see the
/// [module documentation](self) for how replays are consumed. `Send` and `Sync`.
#[derive(Debug)]
pub struct GraphReadback {
    engine: Arc<Engine>,
    schema: Arc<ColumnSchema>,
    /// Serializes the consumers in `next`, so readbacks are taken in order. The
    /// non-blocking paths only try it.
    consumer: Mutex<()>,
    /// Replays taken and not yet released, with their counts. Changes of `cursor` happen
    /// under this lock too.
    held: Mutex<BTreeMap<u64, usize>>,
    /// The next sequence number `next` will return.
    cursor: AtomicU64,
    /// How every recording's count is stored, and its sources' lengths (to decode); `None`
    /// until the first recording. All recordings agree on them (`record` checks).
    recorded: Mutex<Option<(CountKind, Vec<usize>)>>,
}

/// What one attempt to take the next replay came to.
#[derive(Debug)]
pub(crate) enum Take {
    /// Another thread was taking a replay until the deadline: nothing was looked at.
    Busy,
    /// Replay `seq`'s outcome: `Ok((slot, count))`, now held; `Err(Timeout)`, nothing
    /// consumed; any other error consumed it.
    Seq(u64, Result<(usize, usize)>),
}

/// One replay's readback, taken with [`GraphReadback::next`]: derefs to its
/// [`ColumnReadout`]. Holds its slot until dropped.
#[derive(Debug)]
pub struct Replay<'a> {
    graph: &'a GraphReadback,
    readout: ColumnReadout<'a>,
}

impl<'a> std::ops::Deref for Replay<'a> {
    type Target = ColumnReadout<'a>;
    fn deref(&self) -> &ColumnReadout<'a> {
        &self.readout
    }
}

impl Drop for Replay<'_> {
    fn drop(&mut self) {
        self.graph.release(self.readout.seq());
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves its data consistent, so a poisoned lock is still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl GraphReadback {
    /// A graph readback of the columns of `schema`. `config.transport` must be
    /// [`crate::Transport::Mapped`] (the default) and `config.wait` not `Event`; the slot
    /// count bounds how far replays may run ahead of the host.
    pub fn new(
        ctx: &Arc<CudaContext>,
        schema: &ColumnSchema,
        config: ReadbackConfig,
    ) -> Result<Self> {
        schema.validate()?;
        Ok(GraphReadback {
            engine: Engine::new_device_sequenced(ctx, &schema.elem_sizes(), &config)?,
            schema: Arc::new(schema.clone()),
            consumer: Mutex::new(()),
            held: Mutex::new(BTreeMap::new()),
            cursor: AtomicU64::new(1),
            recorded: Mutex::new(None),
        })
    }

    fn dseq(&self) -> &DeviceSeq {
        self.engine
            .device_seq()
            .expect("a graph readback's engine is device-sequenced")
    }

    /// The columns.
    pub fn schema(&self) -> &ColumnSchema {
        &self.schema
    }
    /// Rows one slot holds.
    pub fn capacity(&self) -> usize {
        self.engine.layout().capacity()
    }
    /// Number of slots: how many replays may run ahead of the host.
    pub fn slots(&self) -> usize {
        self.engine.slots()
    }
    /// The slot layout.
    pub fn layout(&self) -> &SlotLayout {
        self.engine.layout()
    }
    /// The context.
    pub fn context(&self) -> &Arc<CudaContext> {
        self.engine.context()
    }
    /// The sequence number [`GraphReadback::next`] returns next (from 1).
    pub fn next_seq(&self) -> u64 {
        self.cursor.load(Ordering::Acquire)
    }
    /// Device address of the `u64` sequence counter: the number of the newest finished pack.
    /// Kernels recorded before a pack may read it (`counter + 1` is that pack's number); only
    /// the pack writes it.
    pub fn device_counter(&self) -> CUdeviceptr {
        self.dseq().counter_ptr()
    }
    /// The newest sequence number the device dropped for lack of a released slot (0: none).
    pub fn last_overrun(&self) -> u64 {
        self.dseq().overrun_seq()
    }

    /// Records one pack of `sources` (`sources[i]` is column `i`) sized by the count at
    /// `count`, on `stream`, after `after` if given. Call it while `stream` is being captured
    /// (the pack becomes a node of the graph, run on every replay); on a stream that is not
    /// capturing, the pack runs once, like an enqueue, and is consumed the same way.
    ///
    /// Errors as an enqueue's: wrong number of columns, a null or misaligned count, a
    /// stream of another context, a driver error (e.g. from the capture); and
    /// [`Error::InvalidConfig`] when the count type or a source length differs from an
    /// earlier recording's (see the module documentation). Nothing is recorded then.
    ///
    /// # Safety
    /// For every run of the pack (every replay of the graph):
    /// - `sources[i].ptr` addresses at least `sources[i].len` elements of column `i`'s type,
    ///   and `count` one naturally aligned `K`, in device memory of this context, allocated
    ///   and not written while the pack runs (order the writers with the capture's streams);
    /// - this `GraphReadback` outlives it: do not launch the graph after dropping it (its
    ///   drop waits for the context's work);
    /// - the packs of this readback run one at a time (see the module documentation);
    /// - `after`, if given, belongs to this context (and to the same capture).
    pub unsafe fn record<K: CountType>(
        &self,
        stream: &CudaStream,
        after: Option<&CudaEvent>,
        sources: &[ColumnSource],
        count: CUdeviceptr,
    ) -> Result<()> {
        self.engine.check_stream(stream)?;
        if let Some(e) = after {
            if e.context().cu_ctx() != self.engine.context().cu_ctx() {
                return Err(Error::ForeignContext { what: "the event" });
            }
        }
        self.record_raw(
            stream.cu_stream(),
            after.map(|e| e.cu_event()),
            sources,
            count,
            K::KIND,
        )
    }

    /// [`GraphReadback::record`] with raw handles (the C API's path). The stream is checked
    /// to belong to this context; addresses are not checked (a capture may use memory the
    /// driver only allocates at instantiation).
    ///
    /// # Safety
    /// As [`GraphReadback::record`]; `stream` and `after` are live handles.
    pub(crate) unsafe fn record_raw(
        &self,
        stream: CUstream,
        after: Option<CUevent>,
        sources: &[ColumnSource],
        count: CUdeviceptr,
        kind: CountKind,
    ) -> Result<()> {
        self.engine.check_raw_stream(stream)?;
        let lens: Vec<usize> = sources.iter().map(|s| s.len).collect();
        // Held across the recording, so concurrent recordings agree too.
        let mut recorded = lock(&self.recorded);
        check_same_recording(recorded.as_ref(), kind, &lens)?;
        self.engine
            .enqueue_device_seq(stream, after, sources, count, kind)?;
        *recorded = Some((kind, lens));
        Ok(())
    }

    /// Blocks until the next replay's readback is there, and returns it. Its slot stays
    /// held (the device will not overwrite it) until the [`Replay`] is dropped.
    ///
    /// Errors: [`Error::Overrun`] when this replay was dropped because the host had fallen
    /// more than `slots` behind; the count's errors for this replay; [`Error::Cuda`] when the
    /// device reports an error (e.g. a faulted kernel), never a hang on a dead context.
    /// Each of these consumes the replay; the next call waits for the following one.
    /// [`Error::InvalidConfig`], at once and consuming nothing, when nothing was recorded yet.
    pub fn next(&self) -> Result<Replay<'_>> {
        self.next_until(None)
    }

    /// Like [`GraphReadback::next`], giving up with [`Error::Timeout`] after `timeout` (also
    /// when another thread is taking a replay all that time); a timeout consumes nothing. A
    /// timeout too large to add to the current time (e.g. `Duration::MAX`) means no limit.
    pub fn next_timeout(&self, timeout: Duration) -> Result<Replay<'_>> {
        self.next_until(Instant::now().checked_add(timeout))
    }

    /// The next replay's readback if it is there, `None` if not yet or if another thread is
    /// taking a replay right now. Never blocks.
    pub fn try_next(&self) -> Result<Option<Replay<'_>>> {
        match self.take(Some(Instant::now()))? {
            Take::Busy | Take::Seq(_, Err(Error::Timeout { .. })) => Ok(None),
            Take::Seq(seq, result) => {
                result.map(|(slot, count)| Some(self.replay(seq, slot, count)))
            }
        }
    }

    fn next_until(&self, deadline: Option<Instant>) -> Result<Replay<'_>> {
        let start = Instant::now();
        match self.take(deadline)? {
            Take::Busy => Err(Error::Timeout {
                waited: start.elapsed(),
            }),
            Take::Seq(seq, result) => result.map(|(slot, count)| self.replay(seq, slot, count)),
        }
    }

    fn replay(&self, seq: u64, slot: usize, count: usize) -> Replay<'_> {
        Replay {
            graph: self,
            readout: ColumnReadout::new(&self.engine, &self.schema, slot, count, seq),
        }
    }

    /// Takes the consumer lock: blocking without a deadline, else trying until it passes.
    fn lock_consumer(&self, deadline: Option<Instant>) -> Option<MutexGuard<'_, ()>> {
        let Some(deadline) = deadline else {
            return Some(lock(&self.consumer));
        };
        let mut attempts = 0u32;
        loop {
            match self.consumer.try_lock() {
                Ok(guard) => return Some(guard),
                Err(TryLockError::Poisoned(p)) => return Some(p.into_inner()),
                Err(TryLockError::WouldBlock) => {}
            }
            if Instant::now() >= deadline {
                return None;
            }
            // Another consumer is waiting for its replay: yield a little, then nap.
            if attempts < 64 {
                attempts += 1;
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }

    /// Waits for readback `next_seq()` under the consumer lock; on success marks it held.
    /// Reports the number it waited for with every outcome (see [`Take`]); errors at once,
    /// consuming nothing, when nothing was recorded.
    pub(crate) fn take(&self, deadline: Option<Instant>) -> Result<Take> {
        let Some((kind, lens)) = lock(&self.recorded).clone() else {
            return Err(Error::config(
                "nothing was recorded on this graph readback: record a pack before taking replays",
            ));
        };
        let Some(_consumer) = self.lock_consumer(deadline) else {
            return Ok(Take::Busy);
        };
        let seq = self.cursor.load(Ordering::Acquire);
        let slot = ((seq - 1) % self.slots() as u64) as usize;
        let outcome = self.wait_for(seq, slot, deadline);
        if let Err(e @ Error::Timeout { .. }) = outcome {
            return Ok(Take::Seq(seq, Err(e)));
        }
        let decoded = outcome.and_then(|()| {
            decode_trailer(
                &self.engine.read_trailer(slot),
                seq,
                slot,
                kind,
                self.capacity(),
                &lens,
            )
        });
        let mut held = lock(&self.held);
        if let Ok(count) = decoded {
            held.insert(seq, count);
        }
        self.cursor.store(seq + 1, Ordering::Release);
        self.publish_released(&held);
        Ok(Take::Seq(seq, decoded.map(|count| (slot, count))))
    }

    fn wait_for(&self, seq: u64, slot: usize, deadline: Option<Instant>) -> Result<()> {
        let start = Instant::now();
        let dseq = self.dseq();
        loop {
            for _ in 0..256 {
                // The overrun word first: if a pack numbered >= seq has finished, pack `seq`
                // finished before it (packs run one at a time), so its trailer is final.
                let overrun = dseq.overrun_seq();
                if self.engine.seq_visible(slot, seq) {
                    return Ok(());
                }
                if overrun >= seq {
                    return Err(Error::Overrun { seq });
                }
                std::hint::spin_loop();
            }
            self.engine.check_device()?;
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(Error::Timeout {
                    waited: start.elapsed(),
                });
            }
        }
    }

    /// Releases a held replay (in any order). Returns false if `seq` was not held.
    pub(crate) fn release(&self, seq: u64) -> bool {
        let mut held = lock(&self.held);
        let was = held.remove(&seq).is_some();
        self.publish_released(&held);
        was
    }

    /// Readout of a held replay (for the C API, which holds replays by number); `None` if
    /// `seq` is not held.
    pub(crate) fn held_readout(&self, seq: u64) -> Option<ColumnReadout<'_>> {
        let count = lock(&self.held).get(&seq).copied()?;
        let slot = ((seq - 1) % self.slots() as u64) as usize;
        Some(ColumnReadout::new(
            &self.engine,
            &self.schema,
            slot,
            count,
            seq,
        ))
    }

    /// Every number below the oldest held replay (or below the cursor, if none is held) has
    /// been released: the device may overwrite their slots.
    fn publish_released(&self, held: &BTreeMap<u64, usize>) {
        let cursor = self.cursor.load(Ordering::Acquire);
        let oldest = held.keys().next().copied().unwrap_or(cursor).min(cursor);
        self.dseq().set_released(oldest - 1);
    }
}

/// Errors unless a recording of count kind `kind` and source lengths `lens` agrees with the
/// earlier ones (`recorded`, `None` before the first). A different number of columns is
/// left to the engine's own check.
fn check_same_recording(
    recorded: Option<&(CountKind, Vec<usize>)>,
    kind: CountKind,
    lens: &[usize],
) -> Result<()> {
    let Some((k, l)) = recorded else {
        return Ok(());
    };
    if *k != kind {
        return Err(Error::config(format!(
            "every recording of one graph readback has the same count type: {k:?} before, \
             {kind:?} now (use a graph readback per count type)"
        )));
    }
    if l.len() == lens.len() && l.as_slice() != lens {
        return Err(Error::config(format!(
            "every recording of one graph readback has the same source lengths (they name \
             the short column of a count error): {l:?} before, {lens:?} now"
        )));
    }
    Ok(())
}

// Compile-time proof of the thread-safety claims in the docs.
const _: () = {
    const fn send_sync<X: Send + Sync>() {}
    send_sync::<GraphReadback>();
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recordings_must_agree_on_count_type_and_lengths() {
        let first = (CountKind::I32, vec![10, 20]);
        assert!(check_same_recording(None, CountKind::U64, &[1]).is_ok());
        assert!(check_same_recording(Some(&first), CountKind::I32, &[10, 20]).is_ok());
        let kind = check_same_recording(Some(&first), CountKind::I64, &[10, 20]);
        assert!(
            matches!(&kind, Err(Error::InvalidConfig { reason }) if reason.contains("I32 before, I64 now")),
            "{kind:?}"
        );
        let lens = check_same_recording(Some(&first), CountKind::I32, &[10, 21]);
        assert!(
            matches!(&lens, Err(Error::InvalidConfig { reason }) if reason.contains("[10, 20] before, [10, 21] now")),
            "{lens:?}"
        );
        // Another column count is the engine's error to report (it refuses to record).
        assert!(check_same_recording(Some(&first), CountKind::I32, &[10]).is_ok());
    }
}
