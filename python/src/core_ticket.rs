//! The core's ticket of either kind a Python `Ticket` wraps: a pack's or an append's.
use crate::readout::{HeldSlot, Holder};
use srb::ColumnReadout;
use std::time::Duration;

pub(crate) enum Core {
    Pack(srb::ColumnTicket),
    Append(srb::AppendTicket),
}

impl Core {
    pub(crate) fn wait_timeout(&self, t: Duration) -> srb::Result<ColumnReadout<'_>> {
        match self {
            Core::Pack(c) => c.wait_timeout(t),
            Core::Append(c) => c.wait_timeout(t),
        }
    }
    pub(crate) fn try_wait(&self) -> srb::Result<Option<ColumnReadout<'_>>> {
        match self {
            Core::Pack(c) => c.try_wait(),
            Core::Append(c) => c.try_wait(),
        }
    }
    pub(crate) fn slot(&self) -> usize {
        match self {
            Core::Pack(c) => c.slot(),
            Core::Append(c) => c.slot(),
        }
    }
    /// The slot, as a readout's hold on it.
    pub(crate) fn held(self) -> HeldSlot {
        match self {
            Core::Pack(c) => HeldSlot::new(Holder::Pack(c)),
            Core::Append(c) => HeldSlot::new(Holder::Append(c)),
        }
    }
}
