//! One cycle of an approach (timed, or a settle cycle), and the criterion-way oracle's batch.
use super::{Approach, Rig, CRITERION_BATCH};
use crate::cuda;
use crate::data::Samples;
use crate::worker::Job;
use anyhow::{Context, Result};
use std::time::Instant;

impl Rig {
    /// One cycle of approach `a`: count `n`, capacity `cap`. Timed, checked and added to
    /// `out` if given; else a settle cycle (see [`crate::schedule`]): the same launches,
    /// copies and wait, untimed, and the host reads none of the data. A settle cycle's error
    /// is returned; a timed cycle's readback error is recorded as a wrong cycle.
    pub fn cycle(
        &mut self,
        a: Approach,
        n: usize,
        cap: usize,
        mut out: Option<&mut Samples>,
    ) -> Result<()> {
        if a == Approach::OracleCriterionWay {
            return self.oracle_criterion_way(n, out);
        }
        let timed = out.is_some();
        let s = self.stream();
        let h = self.dst(a);
        let hc = self.h_count(a);
        let (dd, dc) = (self.d_data(), self.d_count());
        if a == Approach::OracleAfterHostRead && timed {
            // What over_copy's check did to the oracle's destination when they shared one: the
            // host reads its first n elements just before the cycle (untimed).
            // SAFETY: h holds max_n pinned doubles; no copy into it is in flight (its last one
            // was event-synchronized).
            let v = unsafe { std::slice::from_raw_parts(h, n.min(self.max_n)) };
            std::hint::black_box(v.iter().fold(0u64, |acc, x| acc.wrapping_add(x.to_bits())));
        }
        let t0 = Instant::now();
        let cycle = self.produce_with(n, a != Approach::MappedTrailerPlain)?;
        let t1 = Instant::now();
        let verdict = |count: usize, data: &[f64]| cuda::is_correct(count, data, n, cycle);
        let (t2, t3, ok);
        // Every unsafe block below relies on: the device buffers hold max_n >= cap >= n
        // doubles and one count; the pinned destinations hold max_n doubles and one i32 per
        // approach; every copy has completed (event or trailer) before the host reads.
        match a {
            Approach::ProducerOnly => {
                cuda::record(self.done.0, s)?;
                t2 = Instant::now();
                cuda::event_sync(self.done.0)?;
                t3 = Instant::now();
                ok = timed;
            }
            Approach::Naive
            | Approach::Sync
            | Approach::OverCopy
            | Approach::Oracle
            | Approach::OracleAfterHostRead => {
                let knows_n = matches!(a, Approach::Oracle | Approach::OracleAfterHostRead);
                // SAFETY: dc is one i32 of device memory and hc its pinned destination (4
                // bytes); dd holds max_n >= cap >= m doubles and h max_n; hc is read only
                // after a stream sync (Sync) or, for Naive, holds a completed earlier copy.
                unsafe {
                    if !knows_n {
                        cuda::dtoh(hc.cast(), dc, 4, s)?;
                    }
                    let m = match a {
                        Approach::Sync => {
                            cuda::stream_sync(s)?;
                            std::ptr::read_volatile(hc).clamp(0, cap as i32) as usize
                        }
                        // The seed's bug: the host value now is the previous cycle's.
                        Approach::Naive => {
                            std::ptr::read_volatile(hc).clamp(0, cap as i32) as usize
                        }
                        Approach::OverCopy => cap,
                        _ => n,
                    };
                    cuda::dtoh(h.cast(), dd, m * 8, s)?;
                }
                cuda::record(self.done.0, s)?;
                t2 = Instant::now();
                cuda::event_sync(self.done.0)?;
                t3 = Instant::now();
                if !timed {
                    return Ok(());
                }
                let count = if knows_n {
                    n
                } else {
                    // SAFETY: hc is this approach's pinned i32; its copy completed (event
                    // synchronized above).
                    unsafe { std::ptr::read_volatile(hc) }.max(0) as usize
                };
                // SAFETY: h holds max_n pinned doubles, written by copies that completed
                // (event synchronized above); no copy is in flight while the slice lives.
                let data = unsafe { std::slice::from_raw_parts(h, count.min(self.max_n)) };
                ok = verdict(count, data);
            }
            Approach::CallbackWorker => {
                // SAFETY: dc is one i32 of device memory, hc its 4-byte pinned destination,
                // read by the worker only after this copy (stream order before its host
                // function).
                unsafe { cuda::dtoh(hc.cast(), dc, 4, s)? };
                let job = Job {
                    h_count: hc,
                    d_data: dd,
                    h_data: h,
                    cap,
                    stream: s,
                    done: self.worker_done.0,
                };
                self.worker.submit(s, job)?;
                t2 = Instant::now();
                self.worker.wait(self.worker_done.0)?;
                t3 = Instant::now();
                if !timed {
                    return Ok(());
                }
                // SAFETY: hc is this approach's pinned i32; its copy completed before the
                // worker ran, and the worker's event was waited for above.
                let count = unsafe { std::ptr::read_volatile(hc) }.max(0) as usize;
                // SAFETY: h holds max_n pinned doubles; the worker's copy completed (its
                // event was waited for above) and nothing writes h while the slice lives.
                let data = unsafe { std::slice::from_raw_parts(h, count.min(self.max_n)) };
                ok = verdict(count, data);
            }
            Approach::OracleCriterionWay => unreachable!("timed by Rig::oracle_criterion_way"),
            Approach::StagedSizedBare => {
                let (done, len) = (self.done.0, self.max_n);
                let bare = self.bare_sized(cap)?;
                // SAFETY: the rig's context is current on this thread (bound by main before
                // the sweep) and `s` is its stream; dd holds max_n doubles and dc one i32,
                // rewritten only by the next cycle's producer on the same stream; the launch
                // is waited for (event synchronized below) before the next one, and the rig
                // drains its stream before it drops.
                unsafe { bare.launch(s, dd, len, dc, cycle)? };
                cuda::record(done, s)?;
                t2 = Instant::now();
                cuda::event_sync(done)?;
                // The trailer decoded inside the timed wait, as a ticket's wait decodes it.
                let count = bare.count();
                t3 = Instant::now();
                if !timed {
                    return Ok(());
                }
                std::hint::black_box(&count);
                // SAFETY: the launch completed: the event recorded after it was synchronized.
                let rows = unsafe { bare.rows() };
                ok = match (rows, out.as_deref_mut()) {
                    (Ok(rows), _) => verdict(rows.len(), rows),
                    (Err(e), Some(out)) => {
                        out.error.get_or_insert(format!("{e}"));
                        false
                    }
                    (Err(_), None) => false,
                };
            }
            Approach::MappedEvent
            | Approach::MappedTrailer
            | Approach::Staged
            | Approach::StagedSized
            | Approach::MappedTrailerPlain
            | Approach::MappedTrailerNoPdl
            | Approach::Append => {
                let rbs = self.rbs(cap)?;
                let rb = match a {
                    Approach::MappedEvent => &rbs.mapped_event,
                    Approach::MappedTrailer => &rbs.mapped_trailer,
                    Approach::Staged => &rbs.staged,
                    Approach::StagedSized => &rbs.staged_sized,
                    Approach::MappedTrailerNoPdl => &rbs.no_pdl,
                    _ => &rbs.plain,
                };
                let ticket = self.enqueue(rb)?;
                t2 = Instant::now();
                let r = ticket.wait();
                t3 = Instant::now();
                ok = match (r, out.as_deref_mut()) {
                    (Ok(r), Some(_)) => verdict(r.count(), r.as_slice()),
                    (Ok(_), None) => false,
                    (Err(e), Some(out)) => {
                        out.error.get_or_insert(format!("{e}"));
                        false
                    }
                    (Err(e), None) => return Err(e.into()),
                };
            }
        }
        if let Some(out) = out {
            out.record(t0, t1, t2, t3, ok);
        }
        Ok(())
    }

    /// One sample of the criterion-way oracle at count `n`: [`CRITERION_BATCH`] iterations of
    /// the bench's `Rig::oracle` back to back (its producer `srb_produce_f64` on the bench's
    /// grid, one cuMemcpyDtoHAsync of n doubles into this approach's own destination, a
    /// cudarc event record + synchronize, a volatile read of the last element), one host clock
    /// around the batch, as criterion times its batches; latency, enqueue (copy + record) and
    /// wait (synchronize + read) are the batch's means. Checked as far as the bench reads: the
    /// last element of every iteration, and the first of the last one (the host reads nothing
    /// else of its destination). Without `out`, a settle cycle: one iteration, not recorded.
    fn oracle_criterion_way(&mut self, n: usize, out: Option<&mut Samples>) -> Result<()> {
        let s = self.stream();
        let h = self.dst(Approach::OracleCriterionWay);
        let (dd, dc) = (self.d_data(), self.d_count());
        let mut ok = n >= 1 && n <= self.max_n;
        let (mut enqueue, mut wait) = (0.0, 0.0);
        let us = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e6;
        let iterations = if out.is_some() { CRITERION_BATCH } else { 1 };
        let t0 = Instant::now();
        for _ in 0..iterations {
            self.cycle += 1;
            let cycle = self.cycle;
            cuda::produce_bench(&self.produce_bench, s, self.sms, dd, dc, n as u64, cycle)?;
            let t1 = Instant::now();
            // SAFETY: h holds max_n pinned doubles and dd max_n device doubles, n <= max_n.
            unsafe { cuda::dtoh(h.cast(), dd, n.min(self.max_n) * 8, s)? };
            self.bench_done
                .record(&self.stream)
                .context("cuEventRecord")?;
            let t2 = Instant::now();
            self.bench_done
                .synchronize()
                .context("cuEventSynchronize")?;
            // SAFETY: the copy completed (event synchronized); h holds max_n doubles.
            let last = unsafe { std::ptr::read_volatile(h.add(n.clamp(1, self.max_n) - 1)) };
            let t3 = Instant::now();
            std::hint::black_box(last);
            ok &= last == cuda::expected(n.saturating_sub(1), cycle);
            enqueue += us(t1, t2);
            wait += us(t2, t3);
        }
        let t_end = Instant::now();
        let Some(out) = out else { return Ok(()) };
        // SAFETY: the last copy completed (event synchronized above).
        ok &= unsafe { std::ptr::read_volatile(h) } == cuda::expected(0, self.cycle);
        let k = f64::from(CRITERION_BATCH);
        out.record_us(us(t0, t_end) / k, enqueue / k, wait / k, ok);
        Ok(())
    }
}
