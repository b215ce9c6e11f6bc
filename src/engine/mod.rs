//! The column core under every readback type: slots of pinned memory, the pack kernels that
//! fill them, and the device-side append that user kernels fill them with. The files:
//!
//! - `slots.rs` ([`Slots`]): what every readback has (the slot memory, its layout, the pack
//!   kernels, the per-slot device scratch) and the checks of what an enqueue is given;
//! - `host/` ([`host::HostEngine`]): host-sequenced readbacks (tickets), a ring of slots
//!   (`ring.rs`) with one event each; a folder by phase: `mod.rs` (the engine, its creation
//!   and drop), `enqueue.rs`, `append.rs`, `wait.rs`;
//! - `device.rs` ([`device::DeviceEngine`]): device-sequenced readbacks (CUDA graph replay);
//! - `tracked.rs`: the safe enqueue's cudarc glue (buffers with their element type erased,
//!   bound through cudarc's event tracking);
//! - `ticket.rs` ([`ticket::TicketCore`]), `trailer.rs` (decoding a slot's trailer) and
//!   `view.rs` ([`view::SlotView`]): what every ticket and readout is made of;
//! - `sources.rs`: an enqueue's sources and lengths, inline.
//!
//! # The hops of one enqueue
//! `Readback::enqueue` of a mapped readback, on the stream its slot was last used on, with no
//! `after` event. Each line is one call into another file, in order; reads of plain values
//! (the layout's offsets, a `RawCount`'s fields) are left out.
//!
//! 1. `readback.rs` → `columns.rs`: `ColumnReadback::engine` (the current slots, after a grow);
//! 2. `readback.rs` → `engine/tracked.rs`: `enqueue_tracked`;
//! 3. `tracked.rs` → `host/mod.rs`, `slots.rs`: `check_stream`, the context of every buffer;
//! 4. `tracked.rs` → `host/enqueue.rs`: `prepare` → `raw/driver.rs`: bind the context, refuse a
//!    capturing stream;
//! 5. `tracked.rs` → cudarc: each buffer's `device_ptr` (its event tracking);
//! 6. `tracked.rs` → `slots.rs`: `check_sources`;
//! 7. `tracked.rs` → `host/enqueue.rs`: `enqueue_prepared` → `host/mod.rs` → `ring.rs`: take a slot;
//! 8. `host/enqueue.rs` → `raw/driver.rs`: `stream_id` (the same stream as the slot's last
//!    readback: no wait on its event);
//! 9. `host/enqueue.rs` → `slots.rs`: `pack_params`, `launch_pack` → `raw/module.rs`:
//!    `Kernel::launch` → `cuLaunchKernelEx`;
//! 10. `host/enqueue.rs` → `raw/driver.rs`: `event_record` (the slot's event);
//! 11. `tracked.rs` → `sources.rs`, `host/enqueue.rs` → `ticket.rs`: the ticket's core;
//! 12. `readback.rs` → `columns.rs` → `ticket.rs`: the `ColumnTicket`, wrapped in a `Ticket`.
//!
//! 21 crossings in all (each arrow above); 10 frames from `Readback::enqueue` to the launch
//! (`enqueue`, `enqueue_inner`, `enqueue_tracked`, `enqueue_tracked_with`,
//! `HostEngine::enqueue_prepared`, `enqueue_launch`, the launch closure, `Slots::launch_pack`,
//! `Kernel::launch`, `launch_dims`).
//!
//! # The hops of one wait
//! `Ticket::wait` of that readback, the trailer already there:
//!
//! 1. `readback.rs` → `ticket.rs`: `ColumnTicket::wait` → `engine/ticket.rs`:
//!    `TicketCore::wait_until`;
//! 2. `engine/ticket.rs` → `host/wait.rs`: `HostEngine::wait` → `raw/driver.rs` (bind) and
//!    `slots.rs` (`seq_visible`, the trailer's acquire load);
//! 3. `engine/ticket.rs` → `slots.rs`: `trailer`; → `trailer.rs`: `decode`;
//! 4. `engine/ticket.rs` → `view.rs`: `SlotView::new`;
//! 5. `readback.rs` → `ticket.rs`: `ColumnReadout::column` → `schema.rs` (the handle and type
//!    checks) and `view.rs` (the slice).
//!
//! 11 crossings; 5 frames to the trailer's load (`Ticket::wait`, `ColumnTicket::wait`,
//! `TicketCore::wait_until`, `HostEngine::wait`, `Slots::seq_visible`).
pub(crate) mod device;
pub(crate) mod host;
pub(crate) mod ring;
mod slots;
mod sources;
pub(crate) mod ticket;
pub(crate) mod tracked;
pub(crate) mod trailer;
pub(crate) mod view;

#[cfg(test)]
mod props;

pub(crate) use slots::Slots;
pub(crate) use sources::{Lens, Sources};
