//! How a readback's slots reach the host ([`Delivery`]): resolved once, when the slots are
//! made, from the settings' [`CopyPlan`] and the driver, and the one place that tells the
//! deliveries apart. Everything that differs between them (the memory the kernels write,
//! whether the host slots are device-mapped, the pack's graph, the copy after the pack, the
//! default wait) is a method here, matched exhaustively.
use super::plan::{CopyPlan, SlotPlan};
use super::sized_copy::{self, SizedCopy};
use crate::config::{StagedCopy, Transport, WaitMode};
use crate::error::{Error, Result};
use crate::launch::LaunchShape;
use crate::layout::SlotLayout;
use crate::raw::buffer::{DeviceBuffer, PinnedBuffer};
use crate::raw::driver;
use crate::raw::switch_graph;
use cudarc::driver::sys::{CUdeviceptr, CUstream};
use cudarc::driver::CudaContext;
use std::sync::Arc;

/// How the slots reach the host.
#[derive(Debug)]
pub(crate) enum Delivery {
    /// The kernels write pinned, device-mapped host slots: only the rows and the trailer
    /// cross the bus.
    Mapped { host: PinnedBuffer },
    /// The kernels write device-side slots (`staging`); one copy of the whole slot into the
    /// pinned host slots follows each pack.
    StagedWhole {
        host: PinnedBuffer,
        staging: DeviceBuffer,
    },
    /// Each slot has a CUDA graph of the pack and a SWITCH node over size classes whose body
    /// copies the rows the count needs: no copy follows the pack. `sized` addresses `host` and
    /// `staging`, so it is declared (and dropped) first.
    StagedSized {
        sized: SizedCopy,
        host: PinnedBuffer,
        staging: DeviceBuffer,
    },
}

impl Delivery {
    /// The delivery of `plan`'s slots in `ctx` (bound), with `sync` the device address of the
    /// slots' sync records and `shape` the pack's launch shape; returns it with the shape its
    /// packs are launched with (the sized copy's, in a graph, never programmatic).
    ///
    /// The staged copy is settled here: the sized copy where the driver has it and builds its
    /// graphs; else, where the settings left the choice to the library
    /// ([`StagedCopy::Auto`]), the whole slot; else
    /// [`Error::SizedCopyUnavailable`], with the driver's error if one failed.
    pub(crate) fn new(
        ctx: &Arc<CudaContext>,
        plan: &SlotPlan,
        sync: CUdeviceptr,
        shape: LaunchShape,
    ) -> Result<(Self, LaunchShape)> {
        let total = plan.total;
        // Before any allocation: whether the host slots are device-mapped follows the copy (a
        // conditional body's copies may only reach device-mapped host memory; the whole-slot
        // copy needs only pinned memory).
        let copy = if forced_whole(plan.copy) {
            Some(StagedCopy::Whole)
        } else {
            plan.copy.resolve(switch_graph::driver_version)?
        };
        Ok(match copy {
            None => (
                Delivery::Mapped {
                    host: PinnedBuffer::new(ctx, total, true)?,
                },
                shape,
            ),
            Some(StagedCopy::Whole | StagedCopy::Auto) => (
                Delivery::StagedWhole {
                    host: PinnedBuffer::new(ctx, total, false)?,
                    staging: DeviceBuffer::new_zeroed(ctx, total)?,
                },
                shape,
            ),
            Some(StagedCopy::Sized) => {
                let host = PinnedBuffer::new(ctx, total, true)?;
                let staging = DeviceBuffer::new_zeroed(ctx, total)?;
                // A graph's kernel node follows the stream's earlier work as a whole.
                let graph_shape = LaunchShape {
                    programmatic: false,
                    ..shape
                };
                let sized = SizedCopy::new(
                    ctx,
                    &plan.layout,
                    plan.config.slots,
                    graph_shape,
                    &host,
                    &staging,
                    sync,
                );
                match sized.map_err(sized_copy::unavailable) {
                    Ok(sized) => (
                        Delivery::StagedSized {
                            sized,
                            host,
                            staging,
                        },
                        graph_shape,
                    ),
                    // Auto promises a working readback: where the driver refuses the switch
                    // image or the graph, it takes the whole-slot copy (in the mapped host
                    // slots already made), and `info()` says so. An explicit Sized gets the
                    // refusal, with the driver's error.
                    Err(Error::SizedCopyUnavailable { .. })
                        if plan.copy == (CopyPlan::Sized { required: false }) =>
                    {
                        (Delivery::StagedWhole { host, staging }, shape)
                    }
                    Err(e) => return Err(e),
                }
            }
        })
    }

    /// The transport this delivery is.
    pub(crate) fn transport(&self) -> Transport {
        match self {
            Delivery::Mapped { .. } => Transport::Mapped,
            Delivery::StagedWhole { .. } | Delivery::StagedSized { .. } => Transport::Staged,
        }
    }

    /// The staged copy in use (never `Auto`); `None` mapped.
    pub(crate) fn staged_copy(&self) -> Option<StagedCopy> {
        match self {
            Delivery::Mapped { .. } => None,
            Delivery::StagedWhole { .. } => Some(StagedCopy::Whole),
            Delivery::StagedSized { .. } => Some(StagedCopy::Sized),
        }
    }

    /// The wait that [`WaitMode::Auto`] stands for: the trailer where the kernels' stores reach
    /// the host in order (mapped), else the event (a DMA lands in no guaranteed byte order).
    pub(crate) fn default_wait(&self) -> WaitMode {
        match self {
            Delivery::Mapped { .. } => WaitMode::Trailer,
            Delivery::StagedWhole { .. } | Delivery::StagedSized { .. } => WaitMode::Event,
        }
    }

    /// The slots as the host reads them.
    pub(crate) fn host(&self) -> &PinnedBuffer {
        match self {
            Delivery::Mapped { host }
            | Delivery::StagedWhole { host, .. }
            | Delivery::StagedSized { host, .. } => host,
        }
    }

    /// Device-visible address of slot 0: where the kernels write.
    pub(crate) fn device_slots(&self) -> CUdeviceptr {
        match self {
            Delivery::Mapped { host } => host.device_ptr(),
            Delivery::StagedWhole { staging, .. } | Delivery::StagedSized { staging, .. } => {
                staging.ptr()
            }
        }
    }

    /// The slots' graphs of the pack and its sized copy, if the packs run in them.
    pub(crate) fn pack_graphs(&self) -> Option<&SizedCopy> {
        match self {
            Delivery::StagedSized { sized, .. } => Some(sized),
            Delivery::Mapped { .. } | Delivery::StagedWhole { .. } => None,
        }
    }

    /// What follows a kernel that filled slot `slot` (laid out by `layout`) on `stream`: the
    /// copy of the whole slot to the host, for the whole-slot delivery; nothing for the others
    /// (mapped slots are written in place, the sized copy ran in the pack's graph).
    ///
    /// # Safety
    /// The context is bound and `stream` is a live stream of it; the caller holds the slot,
    /// whose host side no one reads until the work enqueued here is complete.
    pub(crate) unsafe fn after_fill(
        &self,
        stream: CUstream,
        layout: &SlotLayout,
        slot: usize,
    ) -> Result<()> {
        match self {
            Delivery::StagedWhole { host, staging } => {
                let off = slot * layout.slot_stride();
                // SAFETY: both ranges lie inside their allocations (total_bytes covers every
                // slot); the host range is the held slot's, per the contract.
                unsafe {
                    driver::memcpy_dtoh_async(
                        host.host_ptr().add(off),
                        staging.ptr() + off as u64,
                        layout.slot_bytes(),
                        stream,
                    )
                }
            }
            Delivery::Mapped { .. } | Delivery::StagedSized { .. } => Ok(()),
        }
    }
}

#[cfg(feature = "testing")]
thread_local! {
    /// Test hook: the staged copy that [`StagedCopy::Auto`] settles is the whole slot, as on
    /// a driver without the sized copy (a GPU test forces the fallback that such a driver
    /// takes, which no driver of the test host would). Per thread, so that tests running in
    /// parallel threads of one process do not see each other's setting.
    static FORCE_WHOLE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the test hook forces `plan`'s copy to the whole slot (only where the library
/// chooses: an explicit Sized keeps its driver check).
fn forced_whole(plan: CopyPlan) -> bool {
    #[cfg(feature = "testing")]
    {
        plan == (CopyPlan::Sized { required: false }) && FORCE_WHOLE.with(|f| f.get())
    }
    #[cfg(not(feature = "testing"))]
    {
        let _ = plan;
        false
    }
}

/// Sets the test hook of [`forced_whole`]: readbacks made while it is on settle
/// [`StagedCopy::Auto`] as a driver older than CUDA 12.8 does. This thread only.
#[cfg(feature = "testing")]
pub(crate) fn force_whole_slot_fallback(on: bool) {
    FORCE_WHOLE.with(|f| f.set(on));
}
