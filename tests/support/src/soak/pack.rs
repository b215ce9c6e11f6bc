//! The pack lanes: a `Readback` of one element type and transport, with a random capacity,
//! slot count, wait mode and launch mode, its count table in all four count types, and its
//! tickets in flight.
use super::reference::{check, count_values, expected, Expected, Rng};
use super::{Step, Worker, SOURCE_BYTES};
use anyhow::{Context as _, Result};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, CudaView};
use sized_readback::{
    CountKind, Element, Error, Readback, ReadbackConfig, Ticket, Transport, WaitMode,
};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Device copies of one lane's count table, in all four count types.
struct Counts {
    values: Vec<i64>,
    i32: CudaSlice<i32>,
    u32: CudaSlice<u32>,
    i64: CudaSlice<i64>,
    u64: CudaSlice<u64>,
}

impl Counts {
    fn new(stream: &Arc<CudaStream>, values: Vec<i64>) -> Result<Self> {
        let i32v: Vec<i32> = values.iter().map(|&v| v as i32).collect();
        let u32v: Vec<u32> = values.iter().map(|&v| v as u32).collect();
        let u64v: Vec<u64> = values.iter().map(|&v| v as u64).collect();
        Ok(Counts {
            i32: stream.clone_htod(&i32v)?,
            u32: stream.clone_htod(&u32v)?,
            i64: stream.clone_htod(&values)?,
            u64: stream.clone_htod(&u64v)?,
            values,
        })
    }
}

const CAPACITIES: [usize; 8] = [1, 2, 7, 64, 333, 1024, 2500, 4096];

struct InFlight<T: Element> {
    ticket: Ticket<T>,
    expected: Expected,
    source: usize,
    offset: usize,
    /// Keeps the source-length-limited view's provenance for messages.
    what: String,
}

/// One readback of one element type and transport, with its tickets in flight.
pub(super) struct Lane<T: Element> {
    name: String,
    rb: Readback<T>,
    counts: Counts,
    inflight: VecDeque<InFlight<T>>,
}

impl<T: Element> Lane<T> {
    pub(super) fn new(
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        rng: &mut Rng,
        transport: Transport,
    ) -> Result<Self> {
        let cap = *rng.pick(&CAPACITIES);
        let slots = 1 + rng.below(4) as usize;
        let wait = match transport {
            Transport::Mapped | Transport::Auto => {
                *rng.pick(&[WaitMode::Trailer, WaitMode::Event, WaitMode::Auto])
            }
            Transport::Staged => *rng.pick(&[WaitMode::Event, WaitMode::Auto]),
        };
        let pdl = rng.one_in(2);
        let config = ReadbackConfig::new(cap)
            .slots(slots)
            .transport(transport)
            .wait(wait)
            .programmatic_launch(pdl);
        let rb = Readback::<T>::with_config(ctx, config)?;
        let name = format!(
            "{}x{}B cap {cap} slots {slots} {transport:?}/{:?} pdl={pdl}",
            std::any::type_name::<T>(),
            std::mem::size_of::<T>(),
            rb.info().wait_mode
        );
        let values = count_values(rng, cap, 256);
        Ok(Lane {
            name,
            rb,
            counts: Counts::new(stream, values)?,
            inflight: VecDeque::new(),
        })
    }

    fn enqueue(&mut self, w: &mut Worker) -> Result<()> {
        let size = std::mem::size_of::<T>();
        let cap = self.rb.info().capacity;
        let source = w.rng.below(w.sources.dev.len() as u64) as usize;
        let offset = w.rng.below(16) as usize;
        let room = (SOURCE_BYTES - offset) / size;
        let source_len = if w.rng.one_in(8) {
            w.rng.below(cap as u64) as usize // shorter than the slot: over-source possible
        } else {
            cap + w.rng.below(3) as usize
        }
        .min(room);
        let j = w.rng.below(self.counts.values.len() as u64) as usize;
        let kind = *w.rng.pick(&[
            CountKind::I32,
            CountKind::U32,
            CountKind::I64,
            CountKind::U64,
        ]);
        let expected = expected(kind, self.counts.values[j], cap, source_len);
        let bytes = w.sources.dev[source].slice(offset..offset + source_len * size);
        // SAFETY: the view holds source_len * size bytes; T is valid for any bits.
        let view: CudaView<'_, T> =
            unsafe { bytes.transmute::<T>(source_len) }.context("transmute to the element type")?;
        let c = &self.counts;
        let stream = &w.stream;
        let ticket = match kind {
            CountKind::I32 => self.rb.enqueue(stream, &view, &c.i32.slice(j..j + 1)),
            CountKind::U32 => self.rb.enqueue(stream, &view, &c.u32.slice(j..j + 1)),
            CountKind::I64 => self.rb.enqueue(stream, &view, &c.i64.slice(j..j + 1)),
            // U64: the soak picks the four kinds above, none other.
            _ => self.rb.enqueue(stream, &view, &c.u64.slice(j..j + 1)),
        };
        let ticket = match ticket {
            Ok(t) => t,
            Err(e) => {
                w.mismatch(format!("{}: enqueue failed: {e}", self.name));
                return Ok(());
            }
        };
        w.report.enqueued += 1;
        self.inflight.push_back(InFlight {
            ticket,
            expected,
            source,
            offset,
            what: format!("count {} as {kind:?}, source_len {source_len}", c.values[j]),
        });
        Ok(())
    }

    fn finish(&mut self, w: &mut Worker, f: InFlight<T>, may_drop: bool) {
        if may_drop && w.rng.one_in(64) {
            w.report.dropped_unwaited += 1;
            drop(f); // the slot is reused at once; its next pack waits for this one on the device
            return;
        }
        let timeout = Duration::from_secs(60);
        let result = match w.rng.below(3) {
            0 => f.ticket.wait(),
            1 => f.ticket.wait_timeout(timeout),
            _ => {
                let deadline = Instant::now() + timeout;
                loop {
                    match f.ticket.try_wait() {
                        Ok(Some(out)) => break Ok(out),
                        Ok(None) if Instant::now() < deadline => std::hint::spin_loop(),
                        Ok(None) => break Err(Error::Timeout { waited: timeout }),
                        Err(e) => break Err(e),
                    }
                }
            }
        };
        match check(&result, f.expected, &w.sources.host[f.source][f.offset..]) {
            Ok(bytes) => {
                let r = &mut w.report;
                r.verified += 1;
                r.bytes_compared += bytes;
                match f.expected {
                    Expected::Data(_) => r.verified_data += 1,
                    Expected::Negative(_) => r.negative += 1,
                    Expected::OverCapacity(..) => r.over_capacity += 1,
                    Expected::OverSource(..) => r.over_source += 1,
                }
                if !matches!(f.expected, Expected::Data(_)) {
                    r.verified_status += 1;
                }
                match f.ticket.transport() {
                    Transport::Staged => r.staged += 1,
                    Transport::Mapped | Transport::Auto => r.mapped += 1,
                }
            }
            Err(why) => {
                let msg = format!(
                    "{} seq {} ({}): expected {:?}: {why}",
                    self.name,
                    f.ticket.seq(),
                    f.what,
                    f.expected
                );
                w.mismatch(msg);
            }
        }
    }
}

impl<T: Element> Step for Lane<T> {
    fn step(&mut self, w: &mut Worker) -> Result<()> {
        if self.inflight.len() == self.rb.info().slots {
            let f = self.inflight.pop_front().expect("a ticket in flight");
            self.finish(w, f, true);
        }
        self.enqueue(w)
    }

    fn drain(&mut self, w: &mut Worker) -> Result<()> {
        while let Some(f) = self.inflight.pop_front() {
            self.finish(w, f, false);
        }
        Ok(())
    }
}
