//! The typed single-column readback: [`Readback<T>`], its [`Ticket<T>`] and [`Readout`], a
//! thin face over the multi-column core of [`crate::columns`] with one column of `T`.
use crate::columns::ColumnReadback;
use crate::config::{ReadbackConfig, Transport, WaitMode};
use crate::element::{CountType, Element};
use crate::engine::tracked::Typed;
use crate::engine::view::SlotView;
use crate::error::Result;
use crate::info::ReadbackInfo;
use crate::launch::LaunchShape;
use crate::layout::SlotLayout;
use crate::schema::ColumnSchema;
use crate::source::{ColumnSource, RawCount};
use crate::ticket::ColumnTicket;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaContext, CudaEvent, CudaStream, DevicePtr};
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// Reads back a device-resident count and that many elements of `T`, without the host reading
/// the count first. See the crate documentation for an example.
///
/// `Readback` is `Send` and `Sync`: enqueues from several threads each get their own slot
/// (the slot ring is behind a mutex), tickets can be waited on from any thread, and
/// [`Readback::grow`] works through a shared reference.
#[derive(Debug)]
pub struct Readback<T: Element> {
    inner: ColumnReadback,
    _t: PhantomData<fn() -> T>,
}

impl<T: Element> Readback<T> {
    /// A readback of `capacity` elements per slot with default settings
    /// ([`ReadbackConfig::new`]).
    ///
    /// Errors as [`Readback::with_config`].
    pub fn new(ctx: &Arc<CudaContext>, capacity: usize) -> Result<Self> {
        Self::with_config(ctx, ReadbackConfig::new(capacity))
    }

    /// A readback with explicit settings.
    ///
    /// Errors: [`crate::Error::InvalidConfig`] for zero capacity or slots, sizes that
    /// overflow, an element type aligned to more than 16 bytes, or settings that do not go
    /// together; [`crate::Error::SizedCopyUnavailable`] for [`crate::StagedCopy::Sized`] where
    /// the driver or the settings cannot have it (the mapped transport, a driver older than
    /// CUDA 12.8, programmatic launch asked for; `Auto` takes the whole-slot copy instead);
    /// [`crate::Error::UnsupportedDevice`] below compute capability 7.0; [`crate::Error::Cuda`]
    /// if the driver cannot allocate the slots or load the kernel.
    pub fn with_config(ctx: &Arc<CudaContext>, config: ReadbackConfig) -> Result<Self> {
        // One column of T: every readout reads column 0 as T.
        let mut schema = ColumnSchema::new();
        schema.column::<T>();
        Ok(Readback {
            inner: ColumnReadback::new(ctx, &schema, config)?,
            _t: PhantomData,
        })
    }

    /// The readback's settings in effect and its slot layout, in one value: the one place to
    /// read them.
    pub fn info(&self) -> ReadbackInfo {
        self.inner.info()
    }

    /// Elements one slot holds.
    #[deprecated(since = "0.2.0", note = "use `info().capacity`")]
    pub fn capacity(&self) -> usize {
        self.info().capacity
    }
    /// Number of slots.
    #[deprecated(since = "0.2.0", note = "use `info().slots`")]
    pub fn slots(&self) -> usize {
        self.info().slots
    }
    /// Slots currently held by tickets: live state, not a setting, so not in [`Readback::info`].
    pub fn slots_in_use(&self) -> usize {
        self.inner.slots_in_use()
    }
    /// The transport.
    #[deprecated(since = "0.2.0", note = "use `info().transport`")]
    pub fn transport(&self) -> Transport {
        self.info().transport
    }
    /// The wait mode in effect (never `Auto`).
    #[deprecated(since = "0.2.0", note = "use `info().wait_mode`")]
    pub fn wait_mode(&self) -> WaitMode {
        self.info().wait_mode
    }
    /// The slot layout.
    #[deprecated(since = "0.2.0", note = "use `info().layout`")]
    pub fn layout(&self) -> SlotLayout {
        self.info().layout
    }
    /// The pack kernel's launch shape (grid from the capacity, block, programmatic launch).
    #[deprecated(since = "0.2.0", note = "use `info().launch_shape`")]
    pub fn launch_shape(&self) -> LaunchShape {
        self.info().launch_shape
    }
    /// The context.
    #[deprecated(since = "0.2.0", note = "use `info().context`")]
    pub fn context(&self) -> Arc<CudaContext> {
        self.info().context
    }

    /// Replaces the slots with ones of `capacity` elements, keeping the other settings.
    /// Tickets already handed out keep the old slots alive until they are dropped.
    /// Use after [`crate::Error::CountExceedsCapacity`]: the device data is untouched, so
    /// enqueue again.
    ///
    /// Errors as [`Readback::with_config`]; after one the readback keeps its old slots.
    pub fn grow(&self, capacity: usize) -> Result<()> {
        self.inner.grow(capacity)
    }

    /// Enqueues a readback of `data[..count]` on `stream`, after the work already in it.
    /// Returns at once: no host synchronization, no host read of the count.
    ///
    /// cudarc's event tracking orders the kernel after the last writes to `data` and `count`
    /// made through cudarc, and later cudarc writes after this read. With tracking disabled,
    /// the caller orders them (see [`ColumnReadback::enqueue`]).
    ///
    /// Errors: [`crate::Error::SlotsExhausted`] when every slot is held;
    /// [`crate::Error::ForeignContext`] when a buffer or the stream belongs to another
    /// context; [`crate::Error::BufferTooShort`] for an empty count buffer;
    /// [`crate::Error::StreamCapturing`]; [`crate::Error::Cuda`] on a driver error.
    /// Errors about the count itself come from the ticket's wait ([`Ticket::wait`]).
    pub fn enqueue<D, C, K>(&self, stream: &CudaStream, data: &D, count: &C) -> Result<Ticket<T>>
    where
        D: DevicePtr<T>,
        C: DevicePtr<K>,
        K: CountType,
    {
        let data = Typed(data, PhantomData::<fn() -> T>);
        let t = self.inner.enqueue_erased(stream, None, &[&data], count)?;
        Ok(Ticket::new(t))
    }

    /// Like [`Readback::enqueue`], but the readback also waits for `after` (e.g. the seed's
    /// `compute_done` event recorded on a compute stream), so `stream` can be a copy stream.
    ///
    /// Errors as [`Readback::enqueue`] ([`crate::Error::ForeignContext`] for an event of
    /// another context too).
    pub fn enqueue_after<D, C, K>(
        &self,
        stream: &CudaStream,
        after: &CudaEvent,
        data: &D,
        count: &C,
    ) -> Result<Ticket<T>>
    where
        D: DevicePtr<T>,
        C: DevicePtr<K>,
        K: CountType,
    {
        let data = Typed(data, PhantomData::<fn() -> T>);
        let t = self
            .inner
            .enqueue_erased(stream, Some(after), &[&data], count)?;
        Ok(Ticket::new(t))
    }

    /// Enqueues a readback from raw device addresses, for buffers owned by C/C++ code or
    /// written by kernels that cudarc does not track.
    ///
    /// `after` is the event that marks the producer done (recorded by the caller after the
    /// kernels that write `data` and `count`); pass `None` only if those writes were enqueued
    /// on `stream` itself. The addresses are checked to be device memory of this context.
    ///
    /// # Safety
    /// - `data` addresses at least `len` elements of `T`, and `count` one naturally aligned
    ///   count of its kind, in device memory of this readback's context;
    /// - both stay allocated, and unwritten, until the ticket's readback completes; work that
    ///   writes them next must be ordered after it (e.g. enqueued on `stream`);
    /// - `after`, if given, belongs to this context.
    pub unsafe fn enqueue_raw(
        &self,
        stream: &CudaStream,
        after: Option<&CudaEvent>,
        data: CUdeviceptr,
        len: usize,
        count: RawCount,
    ) -> Result<Ticket<T>> {
        // SAFETY: per the contract.
        let t = unsafe {
            self.inner
                .enqueue_raw(stream, after, &[ColumnSource { ptr: data, len }], count)?
        };
        Ok(Ticket::new(t))
    }
}

/// One enqueued readback. Wait on it ([`Ticket::wait`]), poll it ([`Ticket::try_wait`]),
/// then read the count and data through the [`Readout`] it returns.
///
/// The ticket holds its slot: the slot is not reused until the ticket is dropped, so a
/// `Readout` (which borrows the ticket) can never see its data overwritten. Dropping a ticket
/// without waiting is fine: the slot's next use waits on the device for this one, and the
/// memory is freed only after it completes.
#[derive(Debug)]
pub struct Ticket<T: Element> {
    inner: ColumnTicket,
    _t: PhantomData<fn() -> T>,
}

impl<T: Element> Ticket<T> {
    fn new(inner: ColumnTicket) -> Self {
        Ticket {
            inner,
            _t: PhantomData,
        }
    }

    /// Sequence number of this readback (unique within its readback, from 1).
    pub fn seq(&self) -> u64 {
        self.inner.seq()
    }
    /// The slot it occupies: the next free one after the previous enqueue's, round robin.
    pub fn slot(&self) -> usize {
        self.inner.slot()
    }
    /// The transport of the slots this readback went to (see [`ColumnTicket::transport`]).
    pub fn transport(&self) -> Transport {
        self.inner.transport()
    }

    /// Blocks until the readback is complete, then returns its count and data.
    ///
    /// Errors: the count's errors ([`crate::Error::NegativeCount`],
    /// [`crate::Error::CountExceedsCapacity`], [`crate::Error::CountExceedsSource`]), with
    /// nothing copied; [`crate::Error::CorruptTrailer`] if the slot does not hold this
    /// readback (a bug or memory corruption); [`crate::Error::Cuda`] when the device reports
    /// an error (e.g. the producer kernel faulted), never a hang.
    ///
    /// A count that is wrong in several ways is reported once, in this order:
    /// [`crate::Error::NegativeCount`], then [`crate::Error::CountExceedsCapacity`], then [`crate::Error::CountExceedsSource`]
    /// (the first short column): a count above both the capacity and a source's length is
    /// `CountExceedsCapacity`, the error [`Readback::grow`] answers. The pack kernel checks
    /// in that order and copies nothing; the host decodes the trailer in the same order.
    pub fn wait(&self) -> Result<Readout<'_, T>> {
        self.inner.core.wait_until(None).map(Self::readout)
    }

    /// Like [`Ticket::wait`], but gives up with [`crate::Error::Timeout`] after `timeout`. The
    /// ticket stays valid: wait again later. Other errors as [`Ticket::wait`].
    pub fn wait_timeout(&self, timeout: Duration) -> Result<Readout<'_, T>> {
        self.inner.core.wait_timeout(timeout).map(Self::readout)
    }

    /// Returns the readout if the readback is complete, `None` if it is still in flight.
    /// Never blocks. Errors as [`Ticket::wait`], once complete.
    pub fn try_wait(&self) -> Result<Option<Readout<'_, T>>> {
        Ok(self.inner.core.try_wait()?.map(Self::readout))
    }

    fn readout(view: SlotView<'_>) -> Readout<'_, T> {
        Readout {
            count: view.rows(),
            seq: view.seq(),
            // SAFETY: the readback's one column is of `T` (`Readback::with_config` declares
            // it), which is valid for any bits (Element); its slot has one bucket.
            data: unsafe { view.column::<T>(0) },
        }
    }
}

/// The host's view of a completed readback: the count and exactly that many elements, in
/// pinned host memory. Borrows its [`Ticket`], so the slot stays reserved while it lives;
/// dropping the readout does not release the slot, dropping the ticket does.
#[derive(Debug)]
pub struct Readout<'a, T> {
    count: usize,
    seq: u64,
    data: &'a [T],
}

impl<'a, T> Readout<'a, T> {
    /// The count the device held.
    pub fn count(&self) -> usize {
        self.count
    }
    /// The readback's sequence number.
    pub fn seq(&self) -> u64 {
        self.seq
    }
    /// The `count` elements, for as long as the ticket is borrowed.
    pub fn as_slice(&self) -> &'a [T] {
        self.data
    }
}

impl<T> std::ops::Deref for Readout<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.data
    }
}

// Compile-time proof of the thread-safety claims in the docs.
const _: () = {
    const fn send_sync<X: Send + Sync>() {}
    send_sync::<Readback<f64>>();
    send_sync::<Ticket<f64>>();
    send_sync::<Readout<'static, f64>>();
};
