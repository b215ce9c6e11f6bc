//! The column core under every readback type: slots of pinned memory, the pack kernels that
//! fill them, and the device-side append that user kernels fill them with. The files, bottom
//! up (no module imports one above it: `cargo xtask cycles` checks it):
//!
//! - `plan.rs` ([`plan::SlotPlan`]): the settings checked once per construction, the layout
//!   and the staged copy they ask for;
//! - `pack_params.rs`: the kernels' parameter records and the pack's grid;
//! - `delivery.rs` ([`delivery::Delivery`]): how the slots reach the host (mapped, staged
//!   whole, staged sized), resolved once from the plan and the driver, matched only there;
//! - `sized_copy.rs` ([`sized_copy::SizedCopy`]): the staged sized copy's graphs, one per
//!   slot (the size classes and byte ranges are pure host logic; the driver calls are in
//!   `raw/switch_graph.rs`);
//! - `slots.rs` ([`slots::Slots`]): what every readback has (the plan's layout, its delivery,
//!   the pack kernels and their launch, the per-slot scratch) and the host's reads of a slot;
//! - `checks.rs`: what an enqueue is given, checked against the slots;
//! - `trailer.rs` ([`trailer::Fill`]) and `view.rs` ([`view::SlotView`]): the one decode of
//!   a trailer, and the view of a slot's rows;
//! - `spill.rs` ([`spill::SpillRegion`]): an append readback's spill region;
//! - `ring.rs`, `backoff.rs` (the one wait loop), `tracked.rs` (cudarc's buffers, their
//!   element type erased);
//! - `host/` ([`host::HostEngine`]): host-sequenced readbacks, a ring of slots with one event
//!   each: `mod.rs` (creation and drop), `enqueue.rs`, `append.rs`, `wait.rs`,
//!   `spill_fetch.rs` (the fetch of spilled rows, for both engines);
//! - `ticket.rs` ([`ticket::TicketCore`]): a held slot of a host engine;
//! - `device.rs` ([`device::DeviceEngine`]): device-sequenced readbacks (CUDA graph replay).
//!
//! # The frames of one enqueue
//! `Readback::enqueue` to the driver, for each delivery (`ARCHITECTURE.md` walks the files):
//!
//! - mapped and staged whole: `Readback::enqueue` → `ColumnReadback::enqueue_erased` →
//!   `HostEngine::enqueue_tracked` → `HostEngine::pack` → `Slots::launch` → `Kernel::launch`
//!   (`cuLaunchKernelEx`): 6 frames; the staged whole copy is `HostEngine::complete` →
//!   `Slots::after_fill` → `Delivery::after_fill` (`cuMemcpyDtoHAsync`), after the launch;
//! - staged sized: the same to `Slots::launch`, then `SwitchGraph::launch`
//!   (`cuGraphExecKernelNodeSetParams`, `cuGraphLaunch`): 6 frames;
//! - under `Transport::Auto` the same, on the slot set the last count chose
//!   (`columns.rs`); the other set is tried only where every slot of the first is held.
//!
//! The checks before the launch (`checks.rs`), the slot's ring (`ring.rs`) and its event
//! (`raw/event.rs`) are calls that return before it.

pub(crate) mod backoff;
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
