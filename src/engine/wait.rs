//! The wait path of a host-sequenced readback: spin on the trailer (mapped) or wait on the
//! slot's event, with a deadline, never hanging on a dead context.
use super::host::HostEngine;
use super::ring::Lease;
use crate::config::WaitMode;
use crate::error::{Error, Result};
use crate::raw::driver;
use std::sync::atomic::{fence, Ordering};
use std::time::Instant;

impl HostEngine {
    /// Blocks until `lease`'s readback is complete (its trailer shows its `seq`, or its event
    /// completed), or the deadline passes ([`Error::Timeout`]), or the device reports an error.
    pub(crate) fn wait(&self, lease: &Lease, deadline: Option<Instant>) -> Result<()> {
        driver::bind(self.context())?;
        let start = Instant::now();
        let event = self.events[lease.slot];
        let timed_out = || Error::Timeout {
            waited: start.elapsed(),
        };
        match self.slots.wait_mode() {
            WaitMode::Trailer => loop {
                for _ in 0..256 {
                    if self.slots.seq_visible(lease.slot, lease.seq) {
                        return Ok(());
                    }
                    std::hint::spin_loop();
                }
                // SAFETY: live event of this engine.
                if unsafe { driver::event_query(event)? } {
                    // Complete: the trailer must be there now (decoding reports it if not).
                    fence(Ordering::Acquire);
                    return Ok(());
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(timed_out());
                }
            },
            _ => match deadline {
                None => {
                    // SAFETY: live event of this engine.
                    unsafe { driver::event_synchronize(event) }.map(|()| fence(Ordering::Acquire))
                }
                Some(d) => loop {
                    // SAFETY: live event of this engine.
                    if unsafe { driver::event_query(event)? } {
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
        // SAFETY: live event of this engine.
        let done = unsafe { driver::event_query(self.events[lease.slot])? };
        if done {
            fence(Ordering::Acquire);
        }
        Ok(done)
    }
}
