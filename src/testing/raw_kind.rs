//! The pack kernel given a count kind value the host never checked: the one way to reach the
//! kernel's guard against a kind it does not know, which neither the safe API (a
//! [`CountKind`] is always a known kind) nor the C API (it refuses an unknown `count_kind`
//! before any launch) can.
use crate::element::CountKind;
use crate::engine::pack_params::{self, PackTarget, SlotAt};
use crate::engine::slots::Trailer;
use crate::engine::trailer::{self, Fill, Lens};
use crate::error::Result;
use crate::launch::LaunchShape;
use crate::layout::SlotLayout;
use crate::raw::buffer::{DeviceBuffer, PinnedBuffer};
use crate::raw::{abi, driver, module};
use crate::source::{ColumnSource, RawCount};
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::CudaContext;
use std::ffi::c_void;
use std::sync::Arc;

/// Runs the library's `srb_pack` once in `ctx` with `count_kind` as its parameters' kind (any
/// value, also one no count type has), the count at `count` and the `u64` rows at `rows` (`len`
/// readable), into one fresh mapped slot of `capacity` rows; waits for it (synchronizing the
/// context) and decodes the slot's trailer as a readback of a `u64` count would. Returns the
/// rows the slot holds, or the error the trailer reports: for a kind the kernel does not know,
/// [`crate::Error::UnknownCountKind`].
///
/// # Safety
/// `count` and `rows` are device memory of `ctx`, valid for what a pack of a known kind reads
/// (`count` aligned for that kind), until this returns.
pub unsafe fn pack_with_count_kind(
    ctx: &Arc<CudaContext>,
    count_kind: u32,
    count: CUdeviceptr,
    rows: CUdeviceptr,
    len: usize,
    capacity: usize,
) -> Result<usize> {
    driver::ensure_driver()?;
    driver::bind(ctx)?;
    let layout = SlotLayout::new(capacity, &[8])?;
    let slots = PinnedBuffer::new(ctx, layout.total_bytes(1)?, true)?;
    let sync = DeviceBuffer::new_zeroed(ctx, std::mem::size_of::<abi::srb_slot_sync>())?;
    let module = module::Module::library(ctx)?;
    let pack = module.function(c"srb_pack")?;
    let target = PackTarget {
        slots: slots.device_ptr(),
        slot_sync: sync.ptr(),
        num_slots: 1,
    };
    let seq = 1;
    let sources = [ColumnSource { ptr: rows, len }];
    let mut p = pack_params::pack_params(
        &layout,
        target,
        &sources,
        RawCount::new(count, CountKind::U64),
        SlotAt::Host { seq, slot: 0 },
    );
    p.count_kind = count_kind;
    let shape = LaunchShape {
        grid: 1,
        block: abi::SRB_PACK_THREADS,
        programmatic: false,
    };
    let mut params = [(&mut p as *mut abi::srb_pack_params).cast::<c_void>()];
    // SAFETY: one parameter, an srb_pack_params, alive for the call; the slot and its sync
    // record are ours and live until the context is synchronized below; the count and rows are
    // valid per this function's contract; the legacy default stream of the bound context.
    unsafe { pack.launch(std::ptr::null_mut(), shape, &mut params)? };
    ctx.synchronize()
        .map_err(crate::Error::cuda("cuCtxSynchronize"))?;
    // SAFETY: the trailer lies inside the slot (total_bytes covers it), 16-byte aligned, and
    // the kernel has finished (the context was synchronized); plain integers.
    let t: Trailer = unsafe {
        std::ptr::read_volatile(
            slots
                .host_ptr()
                .add(layout.trailer_offset())
                .cast::<Trailer>(),
        )
    };
    let fill = Fill::Pack {
        kind: CountKind::U64,
        lens: Lens::new(&[len]),
    };
    trailer::decode(&t, seq, 0, capacity, &fill, layout.elem_sizes())
}
