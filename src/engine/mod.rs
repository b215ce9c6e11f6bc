//! The column core under every readback type: slots of pinned memory, the pack kernels that
//! fill them, and the device-side append that user kernels fill them with. The files:
//!
//! - `slots.rs` ([`Slots`]): what every readback has (the slot memory, its layout, the pack
//!   kernels and their launch, the per-slot device scratch) and the checks of what an enqueue
//!   is given;
//! - `host/` ([`host::HostEngine`]): host-sequenced readbacks (tickets), a ring of slots
//!   (`ring.rs`) with one event each; a folder by phase: `mod.rs` (the engine, its creation
//!   and drop), `enqueue.rs` (the safe and the raw enqueue, the pack into a slot),
//!   `append.rs`, `wait.rs`;
//! - `device.rs` ([`device::DeviceEngine`]): device-sequenced readbacks (CUDA graph replay);
//! - `backoff.rs`: the one wait loop (spin, check the device now and then, give up at a
//!   deadline) of every wait;
//! - `sized_copy.rs` ([`sized_copy::SizedCopy`]): the staged transport's sized copy, one
//!   graph per slot of the pack and a SWITCH node over size classes (the size classes and the
//!   byte ranges each copies are pure host logic there; the driver calls in
//!   `raw/switch_graph.rs`);
//! - `spill.rs` ([`spill::SpillRegion`]): an append readback's spill region and the one fetch
//!   of its rows, for both engines;
//! - `tracked.rs`: the safe enqueue's cudarc glue (buffers with their element type erased);
//! - `trailer.rs` ([`trailer::Fill`]): what fills a slot, and the one decode of its trailer
//!   for both engines;
//! - `ticket.rs` ([`ticket::TicketCore`]) and `view.rs` ([`view::SlotView`]): what every
//!   ticket and readout is made of.
//!
//! # The hops of one enqueue
//! `Readback::enqueue` of a mapped readback, on the stream its slot was last used on, with no
//! `after` event. Each line is one step that calls into other files, in order, with an arrow
//! for each file boundary a call crosses; reads of plain values (a field, the layout's
//! offsets, a `RawCount`'s fields, a cudarc buffer's stream and context) and the standard
//! library are left out, and cudarc counts as one file.
//!
//! 1. `readback.rs` → `columns.rs`: `ColumnReadback::enqueue_erased` (takes the current
//!    engine, after a grow);
//! 2. `columns.rs` → `host/enqueue.rs`: `HostEngine::enqueue_tracked`;
//! 3. `host/enqueue.rs` → `tracked.rs`: the context of every buffer;
//! 4. `host/enqueue.rs` → `raw/driver.rs`: `prepare`: bind the context, refuse a capturing
//!    stream;
//! 5. `host/enqueue.rs` → cudarc: set aside an error cudarc stashed earlier;
//! 6. `host/enqueue.rs` → `tracked.rs` → cudarc: each buffer's `device_ptr` (its event
//!    tracking), and `host/enqueue.rs` → cudarc: the count's;
//! 7. `host/enqueue.rs` → `slots.rs`: `check_sources`;
//! 8. `host/enqueue.rs` → `ring.rs`: take a slot;
//! 9. `host/enqueue.rs` → `raw/driver.rs`: `stream_id` (the same stream as the slot's last
//!    readback: no wait on its event);
//! 10. `host/enqueue.rs` → `slots.rs` → `raw/module.rs`: `Slots::launch` → `Kernel::launch` →
//!     `cuLaunchKernelEx`;
//! 11. `host/enqueue.rs` → `raw/event.rs`: `Event::record` (the slot's event);
//! 12. `host/enqueue.rs` → `trailer.rs`, `ticket.rs`: the ticket's core (its fill's source
//!     lengths, `Lens::of`);
//! 13. `host/enqueue.rs` → cudarc: the buffers' guards record this read; the stashed error
//!     put back;
//! 14. `columns.rs` → `ticket.rs`: the `ColumnTicket`, wrapped in a `Ticket` in
//!     `readback.rs`.
//!
//! 18 crossings in all; 6 frames from `Readback::enqueue` to the launch (`Readback::enqueue`,
//! `ColumnReadback::enqueue_erased`, `HostEngine::enqueue_tracked`, `HostEngine::pack`,
//! `Slots::launch`, `Kernel::launch`).
//!
//! # The hops of a staged enqueue
//! The same call on a staged readback differs at steps 10 and 11 only. With the whole-slot
//! copy ([`crate::StagedCopy::Whole`]), step 11 is preceded by `host/enqueue.rs` →
//! `raw/driver.rs`: `memcpy_dtoh_async` of the whole slot (in `HostEngine::complete`). With the
//! sized copy ([`crate::StagedCopy::Sized`]):
//!
//! 10. `host/enqueue.rs` → `slots.rs` → `sized_copy.rs` → `raw/switch_graph.rs`:
//!     `Slots::launch` → `SizedCopy::launch` → `SwitchGraph::launch` →
//!     `cuGraphExecKernelNodeSetParams` (the pack's parameters, the conditional handle kept)
//!     and `cuGraphLaunch` of the slot's graph (the pack, then the SWITCH node's copy of the
//!     count's class); no copy follows in `HostEngine::complete`;
//! 11. as above: the slot's event, recorded after the graph.
//!
//! 19 crossings; 7 frames to the driver (`SizedCopy::launch` and `SwitchGraph::launch` in
//! place of `Kernel::launch`). The graphs are built once, in `Slots::new` → `sized_copy.rs`
//! (`SizedCopy::new`: the switch image through `raw/module.rs`, the byte ranges of each class)
//! → `raw/switch_graph.rs` (`SwitchGraph::new`: `cuGraphCreate`, the conditional handle and the
//! SWITCH node through entry points fetched with `cuGetProcAddress_v2`, one memcpy node per
//! range in each body, `cuGraphInstantiateWithFlags`, `cuGraphUpload`).
//!
//! # The hops of one wait
//! `Ticket::wait` of that readback, the trailer already there:
//!
//! 1. `readback.rs` → `engine/ticket.rs`: `TicketCore::wait_until`;
//! 2. `engine/ticket.rs` → `host/wait.rs`: `HostEngine::wait` → `raw/driver.rs` (bind) and
//!    `slots.rs` (`seq_visible`, the trailer's acquire load; a trailer not yet there would
//!    go on in `backoff.rs`);
//! 3. `engine/ticket.rs` → `trailer.rs`: `Fill::decode` → `slots.rs` (`trailer`, the read)
//!    and `view.rs` (`SlotView::new`);
//! 4. `readback.rs` → `view.rs` → `slots.rs`: the column's slice, at its host address.
//!
//! 9 crossings; 4 frames to the trailer's load (`Ticket::wait`, `TicketCore::wait_until`,
//! `HostEngine::wait`, `Slots::seq_visible`).
mod backoff;
pub(crate) mod checks;
pub(crate) mod delivery;
pub(crate) mod device;
pub(crate) mod host;
pub(crate) mod pack_params;
pub(crate) mod plan;
pub(crate) mod ring;
pub(crate) mod sized_copy;
pub(crate) mod slots;
pub(crate) mod spill;
pub(crate) mod ticket;
pub(crate) mod tracked;
pub(crate) mod trailer;
pub(crate) mod view;

#[cfg(test)]
mod props;

pub(crate) use backoff::Deadline;
