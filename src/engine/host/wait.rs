//! The wait path of a host-sequenced readback: spin on the trailer (mapped) or wait on the
//! slot's event, with a deadline, never hanging on a dead context.
use super::HostEngine;
use crate::config::WaitMode;
use crate::engine::ring::Lease;
use crate::error::{Error, Result};
use crate::raw::driver;
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

/// How long a trailer wait spins between two queries of the slot's event.
pub(crate) const EVENT_QUERY_PERIOD: Duration = Duration::from_micros(50);

impl HostEngine {
    /// Blocks until `lease`'s readback is complete (its trailer shows its `seq`, or its event
    /// completed), or the deadline passes ([`Error::Timeout`]), or the device reports an error.
    pub(crate) fn wait(&self, lease: &Lease, deadline: Option<Instant>) -> Result<()> {
        driver::bind(self.context())?;
        let start = Instant::now();
        let event = &self.events[lease.slot];
        let timed_out = || Error::Timeout {
            waited: start.elapsed(),
        };
        match self.slots.wait_mode() {
            WaitMode::Trailer => {
                // The event is queried only every EVENT_QUERY_PERIOD of spinning: a query costs
                // about 1.5 µs (H200, driver 580), and a trailer that lands meanwhile is seen only
                // after it. Device errors and kernels that never write the trailer are still
                // reported within that period.
                let mut next_query = start;
                loop {
                    for _ in 0..256 {
                        if self.slots.seq_visible(lease.slot, lease.seq) {
                            return Ok(());
                        }
                        std::hint::spin_loop();
                    }
                    let now = Instant::now();
                    if now >= next_query {
                        if event.query()? {
                            // Complete: the trailer must be there now (decoding says if not).
                            fence(Ordering::Acquire);
                            return Ok(());
                        }
                        next_query = now + EVENT_QUERY_PERIOD;
                    }
                    if deadline.is_some_and(|d| now >= d) {
                        return Err(timed_out());
                    }
                }
            }
            _ => match deadline {
                None => event.synchronize().map(|()| fence(Ordering::Acquire)),
                Some(d) => loop {
                    if event.query()? {
                        fence(Ordering::Acquire);
                        return Ok(());
                    }
                    if Instant::now() >= d {
                        return Err(timed_out());
                    }
                    std::thread::yield_now();
                },
            },
        }
    }

    /// Whether `lease`'s readback is complete, without blocking.
    pub(crate) fn is_complete(&self, lease: &Lease) -> Result<bool> {
        if self.slots.wait_mode() == WaitMode::Trailer
            && self.slots.seq_visible(lease.slot, lease.seq)
        {
            return Ok(true);
        }
        driver::bind(self.context())?;
        let done = self.events[lease.slot].query()?;
        if done {
            fence(Ordering::Acquire);
        }
        Ok(done)
    }
}
