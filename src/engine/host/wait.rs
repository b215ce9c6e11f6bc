//! The wait path of a host-sequenced readback: spin on the trailer (mapped) or wait on the
//! slot's event, with a deadline, never hanging on a dead context.
use super::HostEngine;
use crate::config::WaitMode;
use crate::engine::backoff::{Backoff, Deadline, Pause, QUERY_PERIOD};
use crate::engine::ring::Lease;
use crate::error::Result;
use crate::raw::driver;
use std::sync::atomic::{fence, Ordering};
use std::time::Duration;

impl HostEngine {
    /// Blocks until `lease`'s readback is complete (its trailer shows its `seq`, or its event
    /// completed), or the deadline passes ([`crate::Error::Timeout`]), or the device reports
    /// an error.
    pub(crate) fn wait(&self, lease: &Lease, deadline: Option<Deadline>) -> Result<()> {
        driver::bind(self.context())?;
        let event = &self.events[lease.slot];
        // Complete: the trailer must be there now (decoding says if not).
        let completed = || Ok(event.query()?.then(|| fence(Ordering::Acquire)));
        match (self.slots.wait_mode(), deadline) {
            (WaitMode::Trailer, _) => {
                if self.slots.seq_visible(lease.slot, lease.seq) {
                    return Ok(());
                }
                // Spins on the trailer; the event tells of device errors and of kernels that
                // never write it.
                let trailer = || Ok(self.slots.seq_visible(lease.slot, lease.seq).then_some(()));
                let backoff = Backoff {
                    spins: 256,
                    period: QUERY_PERIOD,
                    pause: Pause::None,
                };
                backoff.run(deadline, trailer, completed)
            }
            (_, None) => event.synchronize().map(|()| fence(Ordering::Acquire)),
            (_, Some(_)) => {
                let backoff = Backoff {
                    spins: 0,
                    period: Duration::ZERO,
                    pause: Pause::Yield,
                };
                backoff.run(deadline, || Ok(None), completed)
            }
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
