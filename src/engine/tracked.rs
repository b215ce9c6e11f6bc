//! The safe enqueue's cudarc glue: device buffers with their element type erased, and the
//! enqueue that binds them through cudarc's event tracking around the pack's launch.
use super::host::HostEngine;
use super::ticket::{Fill, TicketCore};
use super::Sources;
use crate::element::CountType;
use crate::error::{Error, Result};
use crate::layout::MAX_COLUMNS;
use crate::source::{ColumnSource, RawCount};
use cudarc::driver::sys::{CUcontext, CUdeviceptr};
use cudarc::driver::{CudaEvent, CudaStream, DevicePtr, SyncOnDrop};
use std::marker::PhantomData;
use std::sync::Arc;

/// A cudarc device buffer with its element type erased (the handle checked it).
pub(crate) trait ErasedDevicePtr {
    fn len(&self) -> usize;
    fn context(&self) -> CUcontext;
    fn device_ptr<'s>(&'s self, stream: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>);
}

pub(crate) struct Typed<'a, T, D>(pub(crate) &'a D, pub(crate) PhantomData<fn() -> T>);

impl<T, D: DevicePtr<T>> ErasedDevicePtr for Typed<'_, T, D> {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn context(&self) -> CUcontext {
        self.0.stream().context().cu_ctx()
    }
    fn device_ptr<'s>(&'s self, stream: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>) {
        self.0.device_ptr(stream)
    }
}

/// A placeholder for the unused entries of the erased-source array.
pub(crate) struct NoBuffer;
impl ErasedDevicePtr for NoBuffer {
    fn len(&self) -> usize {
        0
    }
    fn context(&self) -> CUcontext {
        std::ptr::null_mut()
    }
    fn device_ptr<'s>(&'s self, _: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>) {
        unreachable!("placeholders are never bound")
    }
}

/// The safe enqueue shared by every façade: checks, joins `after`, refuses a capturing stream,
/// then binds the buffers through cudarc's event tracking (which orders the pack after earlier
/// cudarc writes, and later cudarc writes after it) and launches the pack.
pub(crate) fn enqueue_tracked<K: CountType, C: DevicePtr<K>>(
    engine: &Arc<HostEngine>,
    stream: &CudaStream,
    after: Option<&CudaEvent>,
    sources: &[&dyn ErasedDevicePtr],
    count: &C,
) -> Result<TicketCore> {
    enqueue_tracked_with::<K, C, C>(engine, stream, after, sources, count, None)
}

/// [`enqueue_tracked`], and with `offsets` a bucket pack (`count` then holds k counts).
pub(crate) fn enqueue_tracked_with<K: CountType, C: DevicePtr<K>, O: DevicePtr<K>>(
    engine: &Arc<HostEngine>,
    stream: &CudaStream,
    after: Option<&CudaEvent>,
    sources: &[&dyn ErasedDevicePtr],
    count: &C,
    offsets: Option<&O>,
) -> Result<TicketCore> {
    let slots = engine.slots();
    slots.check_stream(stream)?;
    let after = after.map(|e| slots.check_event(e)).transpose()?;
    let ctx = slots.context().cu_ctx();
    if sources.iter().any(|s| s.context() != ctx) {
        return Err(Error::ForeignContext {
            what: if sources.len() == 1 {
                "the data"
            } else {
                "a column's data"
            },
        });
    }
    if count.stream().context().cu_ctx() != ctx {
        return Err(Error::ForeignContext { what: "the count" });
    }
    let k = engine.slots().layout().buckets();
    let need = if offsets.is_some() { k } else { 1 };
    if count.len() < need {
        return Err(Error::BufferTooShort {
            what: if offsets.is_some() {
                "the counts"
            } else {
                "the count"
            },
            len: count.len(),
            need,
        });
    }
    if let Some(o) = offsets {
        if o.stream().context().cu_ctx() != ctx {
            return Err(Error::ForeignContext {
                what: "the offsets",
            });
        }
        if o.len() < k {
            return Err(Error::BufferTooShort {
                what: "the offsets",
                len: o.len(),
                need: k,
            });
        }
    }
    // SAFETY: the stream and event belong to this context (checked above). Before cudarc's
    // event tracking (the guards below) can put its waits into a capture.
    unsafe { engine.prepare(stream.cu_stream(), after)? };
    // An error cudarc stashed before this call is not this call's: set it aside, and put it
    // back afterwards for whichever cudarc call reports it next.
    let earlier = slots.context().check_err();
    let lease = {
        // The guards make `stream` wait for earlier cudarc writes now, and record this read
        // when they drop, after the launch.
        let mut guards: [Option<SyncOnDrop<'_>>; MAX_COLUMNS + 2] = Default::default();
        let mut cols = [ColumnSource::default(); MAX_COLUMNS];
        for (i, s) in sources.iter().enumerate() {
            let (ptr, g) = s.device_ptr(stream);
            guards[i] = Some(g);
            cols[i] = ColumnSource { ptr, len: s.len() };
        }
        let (cptr, g) = count.device_ptr(stream);
        guards[MAX_COLUMNS] = Some(g);
        let optr = offsets.map(|o| {
            let (p, g) = o.device_ptr(stream);
            guards[MAX_COLUMNS + 1] = Some(g);
            p
        });
        let cols = &cols[..sources.len()];
        let raw = RawCount::new(cptr, K::KIND);
        slots.check_sources(cols, raw)?;
        // SAFETY: the stream and buffers belong to this context (checked above); cudarc keeps
        // them allocated while borrowed, and its event tracking orders later writes after this
        // read (or, with tracking disabled, the caller promised cudarc to order them); each
        // length is the buffer's true length, and the counts and offsets hold k values.
        let lease = unsafe {
            match optr {
                Some(o) => engine.enqueue_buckets_prepared(stream.cu_stream(), cols, raw, o)?,
                None => engine.enqueue_prepared(stream.cu_stream(), cols, raw)?,
            }
        };
        (lease, Sources::new(cols))
    };
    let (lease, sources) = lease;
    let ticket = engine.ticket(
        lease,
        Fill::Pack {
            kind: K::KIND,
            lens: sources.lens(),
        },
    );
    // The guards recorded their events as they dropped; cudarc stashes a failure there.
    let ours = slots.context().check_err();
    slots.context().record_err(earlier);
    ours.map_err(Error::cuda(
        "cuEventRecord (cudarc's tracking of a source buffer)",
    ))?;
    Ok(ticket)
}
