//! The checks of what an enqueue or a recording is given, against the slots it would fill:
//! streams, events and device addresses of the readback's context, sources that match the
//! layout, a count address that suits its kind. Each check is here once; the engines call
//! them before any launch.
use super::slots::Slots;
use super::tracked::ErasedDevicePtr;
use crate::error::{Error, Result};
use crate::raw::driver;
use crate::source::{ColumnSource, RawCount};
use cudarc::driver::sys::{CUcontext, CUdeviceptr, CUevent, CUstream};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};

impl Slots {
    /// Errors unless `stream` belongs to this readback's context.
    pub(crate) fn check_stream(&self, stream: &CudaStream) -> Result<()> {
        if stream.context().cu_ctx() != self.context().cu_ctx() {
            return Err(Error::ForeignContext { what: "the stream" });
        }
        Ok(())
    }

    /// Errors unless `event` belongs to this readback's context.
    pub(crate) fn check_event(&self, event: &CudaEvent) -> Result<CUevent> {
        if event.context().cu_ctx() != self.context().cu_ctx() {
            return Err(Error::ForeignContext { what: "the event" });
        }
        Ok(event.cu_event())
    }

    /// Errors unless the raw stream `stream` belongs to this readback's context (the null
    /// stream stands for the current context's legacy stream). Binds the context.
    ///
    /// # Safety
    /// `stream` is a live stream handle or null.
    pub(crate) unsafe fn check_raw_stream(&self, stream: CUstream) -> Result<()> {
        driver::bind(self.context())?;
        // SAFETY: per the contract.
        let owner = unsafe { driver::stream_context(stream)? };
        if owner != self.context().cu_ctx() {
            return Err(Error::ForeignContext { what: "the stream" });
        }
        Ok(())
    }

    /// Errors unless the raw device address `ptr` is memory of this readback's context. The
    /// context must be bound.
    pub(crate) fn check_raw_pointer(&self, what: &'static str, ptr: CUdeviceptr) -> Result<()> {
        check_pointer_of(self.context(), what, ptr)
    }

    /// The raw-pointer checks of an enqueue: every non-empty column and the count are device
    /// memory of this context. Binds the context.
    pub(crate) fn check_raw_sources(
        &self,
        sources: &[ColumnSource],
        count: RawCount,
    ) -> Result<()> {
        driver::bind(self.context())?;
        let what = if sources.len() == 1 {
            "the data"
        } else {
            "a column's data"
        };
        for s in sources {
            if s.len > 0 {
                self.check_raw_pointer(what, s.ptr)?;
            }
        }
        if count.ptr() != 0 {
            self.check_raw_pointer("the count", count.ptr())?;
        }
        Ok(())
    }

    /// The safe enqueue's checks of cudarc's buffers, before any is bound: every source, the
    /// count (its context and length) and the offsets (likewise, for a bucket pack) belong to
    /// this context, and the count (k counts for a bucket pack) and offsets hold enough values.
    pub(crate) fn check_tracked(
        &self,
        sources: &[&dyn ErasedDevicePtr],
        (count_ctx, count_len): (CUcontext, usize),
        offsets: Option<(CUcontext, usize)>,
    ) -> Result<()> {
        let ctx = self.context().cu_ctx();
        if sources.iter().any(|s| s.context() != ctx) {
            return Err(Error::ForeignContext {
                what: if sources.len() == 1 {
                    "the data"
                } else {
                    "a column's data"
                },
            });
        }
        if count_ctx != ctx {
            return Err(Error::ForeignContext { what: "the count" });
        }
        let k = self.layout().buckets();
        let need = if offsets.is_some() { k } else { 1 };
        if count_len < need {
            return Err(Error::BufferTooShort {
                what: if offsets.is_some() {
                    "the counts"
                } else {
                    "the count"
                },
                len: count_len,
                need,
            });
        }
        if let Some((offsets_ctx, len)) = offsets {
            if offsets_ctx != ctx {
                return Err(Error::ForeignContext {
                    what: "the offsets",
                });
            }
            if len < k {
                return Err(Error::BufferTooShort {
                    what: "the offsets",
                    len,
                    need: k,
                });
            }
        }
        Ok(())
    }

    /// Errors unless a bucket pack's raw `offsets` address (if any) is non-null and aligned for
    /// `count`'s kind, as the offsets are values of that kind. Pure host logic.
    pub(crate) fn check_offsets(
        &self,
        offsets: Option<CUdeviceptr>,
        count: RawCount,
    ) -> Result<()> {
        match offsets {
            Some(addr) if addr == 0 || !addr.is_multiple_of(count.kind().size() as u64) => {
                Err(Error::BadPointer {
                    what: "the offsets",
                    addr,
                    align: count.kind().size(),
                })
            }
            _ => Ok(()),
        }
    }

    /// Errors unless `columns` match the layout and the count address suits its kind. Pure
    /// host logic.
    pub(crate) fn check_sources(&self, columns: &[ColumnSource], count: RawCount) -> Result<()> {
        let want = self.layout().elem_sizes().len();
        if columns.len() != want {
            return Err(Error::schema(format!(
                "this readback has {want} column(s), the enqueue gave {}",
                columns.len()
            )));
        }
        count.check_address()?;
        if columns.iter().any(|c| c.ptr == 0 && c.len != 0) {
            return Err(Error::BadPointer {
                what: "a column's data",
                addr: 0,
                align: 1,
            });
        }
        Ok(())
    }
}

/// Errors unless the raw device address `ptr` is memory of `ctx` (or mapped memory the driver
/// gives no context, on `ctx`'s device): [`Error::BadPointer`] for an address the driver does
/// not know, [`Error::ForeignContext`] for another context's. `ctx` must be bound.
pub(crate) fn check_pointer_of(
    ctx: &CudaContext,
    what: &'static str,
    ptr: CUdeviceptr,
) -> Result<()> {
    // SAFETY: only queries the driver's bookkeeping for the address.
    match unsafe { driver::pointer_owner(ptr)? } {
        None => Err(Error::BadPointer {
            what,
            addr: ptr,
            align: 1,
        }),
        Some((owner, ordinal)) => {
            let same_ctx = owner.is_null() || owner == ctx.cu_ctx();
            if same_ctx && ordinal as usize == ctx.ordinal() {
                Ok(())
            } else {
                Err(Error::ForeignContext { what })
            }
        }
    }
}
