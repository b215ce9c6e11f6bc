//! Several columns, one count: structure-of-arrays readback.
//!
//! A particle's position, velocity and id live in separate device arrays that share one
//! device-resident count. A [`ColumnReadback`] reads all of them back in one enqueue: one pack
//! kernel launch, one slot, one trailer. Columns may have different element types; the host
//! view gives each one as a typed slice.
//!
//! Declare the columns on a [`ColumnSchema`]; each declaration returns a typed handle
//! ([`Column<T>`]) that binds a device buffer of that type at enqueue time and reads the
//! column back as `&[T]`, so a type mismatch is a compile error rather than a runtime one:
//!
//! ```no_run
//! use sized_readback::{ColumnReadback, ColumnSchema, ReadbackConfig};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = sized_readback::device::open(0)?;
//! let stream = ctx.new_stream()?;
//! let cap = 1 << 20;
//! let d_pos = stream.alloc_zeros::<[f64; 3]>(cap)?;   // a kernel fills pos[..n], id[..n]
//! let d_id = stream.alloc_zeros::<i32>(cap)?;
//! let d_n = stream.alloc_zeros::<i32>(1)?;            // ...and writes n here
//!
//! let mut schema = ColumnSchema::new();
//! let pos = schema.column::<[f64; 3]>();
//! let id = schema.column::<i32>();
//! let rb = ColumnReadback::new(&ctx, &schema, ReadbackConfig::new(cap))?;
//!
//! let ticket = rb.enqueue(&stream, &[pos.source(&d_pos), id.source(&d_id)], &d_n)?;
//! let out = ticket.wait()?;
//! let (p, i): (&[[f64; 3]], &[i32]) = (out.column(pos), out.column(id));
//! assert_eq!((p.len(), i.len()), (out.count(), out.count()));
//! # Ok(()) }
//! ```
//!
//! The capacity, overflow and bad-input rules are the single-column ones, applied to every
//! column: a count above the capacity ([`Error::CountExceedsCapacity`]), a negative count
//! ([`Error::NegativeCount`]) or a count above any column's source length
//! ([`Error::CountExceedsSource`], naming the first short column) copies nothing.
use crate::config::{ReadbackConfig, Transport, WaitMode};
use crate::element::{CountType, Element};
use crate::engine::host::{Filled, HostEngine};
use crate::engine::layout::{SlotLayout, COLUMN_ALIGN, MAX_COLUMNS};
use crate::engine::ticket::{Fill, TicketCore};
use crate::engine::view::SlotView;
use crate::engine::{ColumnSource, RawCount, Sources};
use crate::error::{Error, Result};
use crate::raw::module::LaunchShape;
use cudarc::driver::sys::{CUcontext, CUdeviceptr, CUevent, CUstream};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream, DevicePtr, SyncOnDrop};
use std::any::TypeId;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// One declared column: its element size and, for typed columns, its Rust type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnSpec {
    /// Bytes per element.
    pub elem_size: usize,
    /// The element type's name, or `None` for a column declared by size only.
    pub type_name: Option<&'static str>,
    type_id: Option<TypeId>,
    /// The element type's alignment (1 for raw columns).
    align: usize,
}

/// The columns of a multi-column readback, in slot order. Build it with
/// [`ColumnSchema::column`] (typed) or [`ColumnSchema::raw_column`] (by element size).
///
/// A clone keeps the schema's identity: the handles of one are accepted by readbacks made
/// from the other. That is safe because every enqueue checks each bound buffer's element
/// type (typed columns) or size (raw columns) against the readback's own declaration of
/// that column, and every typed read checks the type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnSchema {
    id: u64,
    specs: Vec<ColumnSpec>,
}

impl Default for ColumnSchema {
    fn default() -> Self {
        Self::new()
    }
}

fn next_schema_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl ColumnSchema {
    /// A schema with no columns yet.
    pub fn new() -> Self {
        ColumnSchema {
            id: next_schema_id(),
            specs: Vec::new(),
        }
    }

    /// Adds a column of `T` and returns its typed handle. More than [`MAX_COLUMNS`] columns,
    /// or an element aligned to more than 16 bytes (which [`Element`]'s contract rules out),
    /// is reported as [`Error::InvalidConfig`] when the readback is created.
    pub fn column<T: Element>(&mut self) -> Column<T> {
        self.specs.push(ColumnSpec {
            elem_size: std::mem::size_of::<T>(),
            type_name: Some(std::any::type_name::<T>()),
            type_id: Some(TypeId::of::<T>()),
            align: std::mem::align_of::<T>(),
        });
        Column {
            index: self.specs.len() - 1,
            schema: self.id,
            _t: PhantomData,
        }
    }

    /// Adds a column of `elem_size`-byte elements with no Rust type (what the C API does);
    /// returns its index. Read it with [`ColumnReadout::column_as`] (checked by size) or
    /// [`ColumnReadout::column_bytes`].
    pub fn raw_column(&mut self, elem_size: usize) -> usize {
        self.specs.push(ColumnSpec {
            elem_size,
            type_name: None,
            type_id: None,
            align: 1,
        });
        self.specs.len() - 1
    }

    /// The declared columns, in order.
    pub fn columns(&self) -> &[ColumnSpec] {
        &self.specs
    }

    /// Number of columns.
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// Whether no column is declared yet.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    pub(crate) fn elem_sizes(&self) -> Vec<usize> {
        self.specs.iter().map(|s| s.elem_size).collect()
    }

    /// Errors unless the schema can be laid out: 1 to [`MAX_COLUMNS`] columns, none of an
    /// element type aligned to more than [`COLUMN_ALIGN`] (16) bytes, since each column
    /// starts at a multiple of 16 bytes in the slot. (Element sizes are checked with the
    /// capacity, by the slot layout.)
    pub(crate) fn validate(&self) -> Result<()> {
        if self.specs.is_empty() || self.specs.len() > MAX_COLUMNS {
            return Err(Error::config(format!(
                "a readback carries 1 to {MAX_COLUMNS} columns, the schema declares {}",
                self.specs.len()
            )));
        }
        if let Some((i, spec)) = self
            .specs
            .iter()
            .enumerate()
            .find(|(_, s)| s.align > COLUMN_ALIGN)
        {
            return Err(Error::config(format!(
                "column {i} holds {}, aligned to {} bytes: columns are {COLUMN_ALIGN}-byte aligned \
                 in the slot",
                spec.type_name.unwrap_or("untyped elements"),
                spec.align
            )));
        }
        Ok(())
    }

    /// Matches `sources` to the columns, by index: each column bound exactly once, by a
    /// handle of this schema (or a clone of it) whose element type is the column's declared
    /// type (for a raw column: whose element size is the declared size), so every buffer's
    /// length counts elements of the column's size. Pure host logic: runs before any driver
    /// call.
    fn bind<'s, 'a>(
        &self,
        sources: &'s [Source<'a>],
    ) -> Result<[Option<&'s Source<'a>>; MAX_COLUMNS]> {
        self.validate()?;
        let n = self.specs.len();
        let mut order: [Option<&Source<'_>>; MAX_COLUMNS] = [None; MAX_COLUMNS];
        for s in sources {
            if s.schema != self.id || s.column >= n {
                return Err(Error::schema(format!(
                    "a source was bound with the handle of column {} of another schema",
                    s.column
                )));
            }
            let spec = &self.specs[s.column];
            let fits = match spec.type_id {
                Some(id) => id == s.type_id,
                None => spec.elem_size == s.elem_size,
            };
            if !fits {
                return Err(Error::schema(format!(
                    "column {} holds {} ({} bytes), but its source holds {} ({} bytes)",
                    s.column,
                    spec.type_name.unwrap_or("untyped elements"),
                    spec.elem_size,
                    s.type_name,
                    s.elem_size
                )));
            }
            if order[s.column].replace(s).is_some() {
                return Err(Error::schema(format!("column {} is bound twice", s.column)));
            }
        }
        if let Some(missing) = (0..n).find(|&i| order[i].is_none()) {
            return Err(Error::schema(format!("column {missing} has no source")));
        }
        Ok(order)
    }

    /// [`Self::bind`], as the sources' type-erased buffers in column order (the first
    /// `self.len()` entries; the rest are placeholders).
    fn bind_erased<'s>(
        &self,
        sources: &'s [Source<'_>],
    ) -> Result<[&'s dyn ErasedDevicePtr; MAX_COLUMNS]> {
        let order = self.bind(sources)?;
        let mut erased: [&dyn ErasedDevicePtr; MAX_COLUMNS] = [&NoBuffer; MAX_COLUMNS];
        for (i, s) in order.iter().take(self.len()).enumerate() {
            erased[i] = &*s.expect("bind checked every column").data;
        }
        Ok(erased)
    }

    /// Checks that column `index` may be viewed as `[T]`.
    fn check_type<T: Element>(&self, index: usize) -> Result<()> {
        let spec = self.specs.get(index).ok_or_else(|| {
            Error::schema(format!(
                "column {index} does not exist: the readback has {} column(s)",
                self.specs.len()
            ))
        })?;
        let ok = match spec.type_id {
            Some(id) => id == TypeId::of::<T>(),
            None => {
                spec.elem_size == std::mem::size_of::<T>()
                    && std::mem::align_of::<T>() <= COLUMN_ALIGN
            }
        };
        if ok {
            Ok(())
        } else {
            Err(Error::schema(format!(
                "column {index} holds {} ({} bytes), not {} ({} bytes)",
                spec.type_name.unwrap_or("untyped elements"),
                spec.elem_size,
                std::any::type_name::<T>(),
                std::mem::size_of::<T>()
            )))
        }
    }
}

/// The typed handle of one column, returned by [`ColumnSchema::column`]. `Copy`; use it to
/// bind the column's device buffer ([`Column::source`]) and to read it back
/// ([`ColumnReadout::column`]).
#[derive(Debug)]
pub struct Column<T> {
    index: usize,
    schema: u64,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Column<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Column<T> {}

impl<T: Element> Column<T> {
    /// The column's position in the slot (and in the schema).
    pub fn index(&self) -> usize {
        self.index
    }

    /// Binds a device buffer of `T` (a `CudaSlice<T>` or view) as this column's source for
    /// one enqueue. Its length is the column's source length. The enqueue checks `T` against
    /// the readback's declaration of the column.
    pub fn source<'a, D: DevicePtr<T>>(&self, data: &'a D) -> Source<'a> {
        self.bound(Box::new(Typed(data, PhantomData)))
    }

    /// A source of this column's type over `data`, which holds elements of `T`.
    fn bound<'a>(&self, data: Box<dyn ErasedDevicePtr + 'a>) -> Source<'a> {
        Source {
            column: self.index,
            schema: self.schema,
            type_id: TypeId::of::<T>(),
            type_name: std::any::type_name::<T>(),
            elem_size: std::mem::size_of::<T>(),
            data,
        }
    }
}

/// A column's device buffer, bound for one [`ColumnReadback::enqueue`] by [`Column::source`].
/// Carries the buffer's element type, which the enqueue checks against the column's.
pub struct Source<'a> {
    column: usize,
    schema: u64,
    type_id: TypeId,
    type_name: &'static str,
    elem_size: usize,
    data: Box<dyn ErasedDevicePtr + 'a>,
}

impl std::fmt::Debug for Source<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("column", &self.column)
            .field("type", &self.type_name)
            .field("len", &self.data.len())
            .finish()
    }
}

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

/// Reads back several device arrays that share one device-resident count, in one kernel
/// launch, into one slot with one trailer. `Send` and `Sync`, like [`crate::Readback`].
#[derive(Debug)]
pub struct ColumnReadback {
    engine: RwLock<Arc<HostEngine>>,
    schema: Arc<ColumnSchema>,
}

impl ColumnReadback {
    /// A readback of the columns of `schema`, `config.capacity` rows per slot.
    ///
    /// Errors: [`Error::InvalidConfig`] for no columns or more than [`MAX_COLUMNS`], a zero
    /// capacity or slot count, an element aligned to more than 16 bytes, or sizes that
    /// overflow; [`Error::Cuda`] if the driver cannot allocate the slots or load the kernel.
    pub fn new(
        ctx: &Arc<CudaContext>,
        schema: &ColumnSchema,
        config: ReadbackConfig,
    ) -> Result<Self> {
        Self::check(schema, &config)?;
        Ok(ColumnReadback {
            engine: RwLock::new(HostEngine::new(
                ctx,
                &schema.elem_sizes(),
                &config,
                Filled::Pack,
            )?),
            schema: Arc::new(schema.clone()),
        })
    }

    /// The checks [`ColumnReadback::new`] makes before it touches the driver: the schema, the
    /// settings and the size of the slots. For bindings that report bad settings alike with or
    /// without a GPU.
    ///
    /// Errors: [`Error::InvalidConfig`], as [`ColumnReadback::new`].
    pub fn check(schema: &ColumnSchema, config: &ReadbackConfig) -> Result<()> {
        schema.validate()?;
        if config.buckets != 1 {
            return Err(Error::config(format!(
                "buckets({}) on a readback of one bucket: bucketed readbacks are \
                 BucketReadback (a bucket pack) and AppendReadback (append kernels)",
                config.buckets
            )));
        }
        HostEngine::check(&schema.elem_sizes(), config, Filled::Pack)
    }

    pub(crate) fn engine(&self) -> Arc<HostEngine> {
        self.engine
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The columns.
    pub fn schema(&self) -> &ColumnSchema {
        &self.schema
    }
    /// Rows (elements of every column) one slot holds.
    pub fn capacity(&self) -> usize {
        self.engine().slots().layout().capacity()
    }
    /// Number of slots.
    pub fn slots(&self) -> usize {
        self.engine().slots().num_slots()
    }
    /// Slots currently held by tickets.
    pub fn slots_in_use(&self) -> usize {
        self.engine().held()
    }
    /// The transport.
    pub fn transport(&self) -> Transport {
        self.engine().transport()
    }
    /// The wait mode in effect (never `Auto`).
    pub fn wait_mode(&self) -> WaitMode {
        self.engine().slots().wait_mode()
    }
    /// The slot layout (one region per column, then the trailer).
    pub fn layout(&self) -> SlotLayout {
        self.engine().slots().layout().clone()
    }
    /// The pack kernel's launch shape (grid from the capacity, block, programmatic launch).
    pub fn launch_shape(&self) -> LaunchShape {
        self.engine().slots().launch_shape()
    }
    /// The context.
    pub fn context(&self) -> Arc<CudaContext> {
        self.engine().context().clone()
    }

    /// Replaces the slots with ones of `capacity` rows, keeping the other settings. Tickets
    /// already handed out keep the old slots alive until they are dropped; enqueues racing
    /// with it on other threads use the old slots or the new. Use after
    /// [`Error::CountExceedsCapacity`]: the device data is untouched, so enqueue again.
    pub fn grow(&self, capacity: usize) -> Result<()> {
        let old = self.engine();
        let mut config = old.slots().config().clone();
        config.capacity = capacity;
        let new = HostEngine::new(
            old.context(),
            &self.schema.elem_sizes(),
            &config,
            Filled::Pack,
        )?;
        *self.engine.write().unwrap_or_else(|p| p.into_inner()) = new;
        Ok(())
    }

    /// Enqueues a readback of `count` rows of every column on `stream`, after the work
    /// already in it. `sources` binds each column exactly once, in any order. Returns at once.
    ///
    /// cudarc's event tracking orders the kernel after earlier cudarc writes to the buffers
    /// and later cudarc writes after this read. With tracking disabled
    /// (`CudaContext::disable_event_tracking`), the caller orders them: nothing may write the
    /// buffers or free them until the ticket's readback is complete unless it is enqueued on
    /// `stream` after this call.
    ///
    /// Errors: [`Error::SchemaMismatch`] when a column is missing, bound twice, bound with a
    /// handle of another schema, or bound to a buffer of another element type than the
    /// readback declares for it (checked before any driver call); [`Error::StreamCapturing`];
    /// [`Error::ForeignContext`]; [`Error::SlotsExhausted`]; [`Error::Cuda`]. The count's own
    /// errors come from the ticket's wait.
    pub fn enqueue<C, K>(
        &self,
        stream: &CudaStream,
        sources: &[Source<'_>],
        count: &C,
    ) -> Result<ColumnTicket>
    where
        C: DevicePtr<K>,
        K: CountType,
    {
        self.enqueue_inner(stream, None, sources, count)
    }

    /// Like [`ColumnReadback::enqueue`], but the readback also waits for `after` (an event
    /// recorded after the producer on another stream).
    pub fn enqueue_after<C, K>(
        &self,
        stream: &CudaStream,
        after: &CudaEvent,
        sources: &[Source<'_>],
        count: &C,
    ) -> Result<ColumnTicket>
    where
        C: DevicePtr<K>,
        K: CountType,
    {
        self.enqueue_inner(stream, Some(after), sources, count)
    }

    fn enqueue_inner<C, K>(
        &self,
        stream: &CudaStream,
        after: Option<&CudaEvent>,
        sources: &[Source<'_>],
        count: &C,
    ) -> Result<ColumnTicket>
    where
        C: DevicePtr<K>,
        K: CountType,
    {
        // The element types first: a buffer's length counts elements of the column's size
        // only if it holds the column's type.
        let erased = self.schema.bind_erased(sources)?;
        let core = enqueue_tracked(
            &self.engine(),
            stream,
            after,
            &erased[..self.schema.len()],
            count,
        )?;
        Ok(self.ticket(core))
    }

    /// Enqueues a readback from raw device addresses (`sources[i]` is column `i`), for
    /// buffers owned by C/C++ code or written by kernels cudarc does not track.
    ///
    /// `after` marks the producer done; pass `None` only if the producer ran on `stream`.
    /// Each address is checked to be device memory of this context.
    ///
    /// # Safety
    /// - `sources[i].ptr` addresses at least `sources[i].len` elements of column `i`'s type,
    ///   and `count` one naturally aligned count of its kind, in device memory of this context;
    /// - they stay allocated and unwritten until the readback completes; work that writes
    ///   them next is ordered after it (e.g. enqueued on `stream`);
    /// - `after`, if given, belongs to this context.
    pub unsafe fn enqueue_raw(
        &self,
        stream: &CudaStream,
        after: Option<&CudaEvent>,
        sources: &[ColumnSource],
        count: RawCount,
    ) -> Result<ColumnTicket> {
        let engine = self.engine();
        engine.slots().check_stream(stream)?;
        let after = after.map(|e| engine.slots().check_event(e)).transpose()?;
        // SAFETY: per the contract; the stream and event are of this context (checked).
        let lease = unsafe { engine.enqueue_raw(stream.cu_stream(), after, sources, count)? };
        let fill = Fill::Pack {
            kind: count.kind(),
            lens: Sources::new(sources).lens(),
        };
        Ok(self.ticket(engine.ticket(lease, fill)))
    }

    /// [`ColumnReadback::enqueue_raw`] on raw driver handles: `stream` is a `CUstream` (a
    /// runtime `cudaStream_t`) made by other code, such as a Python framework's current
    /// stream, and `after` a `CUevent`; null `stream` is the legacy default stream. This is
    /// the path of the C API's `srb_enqueue`, for bindings that hold driver handles rather
    /// than cudarc streams: the stream is checked to belong to this readback's context, and
    /// every address to be device memory of it.
    ///
    /// Errors as [`ColumnReadback::enqueue_raw`].
    ///
    /// # Safety
    /// As [`ColumnReadback::enqueue_raw`] for the memory; `stream` (unless null) and `after`
    /// are live handles, and `after` belongs to this readback's context.
    pub unsafe fn enqueue_raw_stream(
        &self,
        stream: CUstream,
        after: Option<CUevent>,
        sources: &[ColumnSource],
        count: RawCount,
    ) -> Result<ColumnTicket> {
        let engine = self.engine();
        // SAFETY: per the contract; enqueue_raw checks the stream and every address.
        let lease = unsafe { engine.enqueue_raw(stream, after, sources, count)? };
        let fill = Fill::Pack {
            kind: count.kind(),
            lens: Sources::new(sources).lens(),
        };
        Ok(self.ticket(engine.ticket(lease, fill)))
    }

    pub(crate) fn ticket(&self, core: TicketCore) -> ColumnTicket {
        ColumnTicket::from_core(core, self.schema.clone())
    }
}

/// Reads back device data the user already partitioned into k buckets (k counts and k rising
/// offsets into every column's source, as CUB's `DevicePartition` or an exclusive scan of the
/// counts leaves them): one pack launch, one slot holding each bucket's count and rows, one
/// trailer. `Send` and `Sync`.
///
/// The capacity is per bucket (`config.capacity` rows each), not shared: a bucket's rows sit at
/// a fixed place in the slot, so the kernel fills every bucket in one pass with no scan of the
/// counts first, and each bucket's rows are contiguous (an MPI send straight from the slot);
/// the price is pinned memory for k full buckets. Size the capacity for the largest bucket.
#[derive(Debug)]
pub struct BucketReadback {
    engine: Arc<HostEngine>,
    schema: Arc<ColumnSchema>,
}

impl BucketReadback {
    /// A readback of `config.buckets` buckets of `config.capacity` rows of the columns of
    /// `schema`. Errors as [`ColumnReadback::new`].
    pub fn new(
        ctx: &Arc<CudaContext>,
        schema: &ColumnSchema,
        config: ReadbackConfig,
    ) -> Result<Self> {
        Self::check(schema, &config)?;
        Ok(BucketReadback {
            engine: HostEngine::new(ctx, &schema.elem_sizes(), &config, Filled::BucketPack)?,
            schema: Arc::new(schema.clone()),
        })
    }

    /// The checks [`BucketReadback::new`] makes before it touches the driver, as
    /// [`ColumnReadback::check`].
    pub fn check(schema: &ColumnSchema, config: &ReadbackConfig) -> Result<()> {
        schema.validate()?;
        HostEngine::check(&schema.elem_sizes(), config, Filled::BucketPack)
    }

    /// The columns.
    pub fn schema(&self) -> &ColumnSchema {
        &self.schema
    }
    /// Buckets of a slot.
    pub fn buckets(&self) -> usize {
        self.engine.slots().layout().buckets()
    }
    /// Rows of each bucket.
    pub fn capacity(&self) -> usize {
        self.engine.slots().layout().capacity()
    }
    /// Number of slots.
    pub fn slots(&self) -> usize {
        self.engine.slots().num_slots()
    }
    /// The slot layout.
    pub fn layout(&self) -> &SlotLayout {
        self.engine.slots().layout()
    }

    /// Enqueues the readback of every bucket on `stream`: bucket b's rows are rows
    /// `offsets[b] .. offsets[b] + counts[b]` of every source (`sources` binds each column once,
    /// as for [`ColumnReadback::enqueue`]). `counts` and `offsets` hold (at least) one value per
    /// bucket, of one count type. Returns at once.
    ///
    /// Errors at once as [`ColumnReadback::enqueue`]; from the ticket's wait:
    /// [`Error::BucketOverCapacity`], [`Error::BucketOutOfRange`] (a range past its source or
    /// into the next bucket's), [`Error::NegativeCount`], each naming the first bad bucket, with
    /// nothing copied.
    pub fn enqueue<C, K>(
        &self,
        stream: &CudaStream,
        sources: &[Source<'_>],
        counts: &C,
        offsets: &C,
    ) -> Result<ColumnTicket>
    where
        C: DevicePtr<K>,
        K: CountType,
    {
        let erased = self.schema.bind_erased(sources)?;
        let core = enqueue_tracked_with(
            &self.engine,
            stream,
            None,
            &erased[..self.schema.len()],
            counts,
            Some(offsets),
        )?;
        Ok(ColumnTicket::from_core(core, self.schema.clone()))
    }

    /// [`BucketReadback::enqueue`] from raw device addresses: `counts` (its kind gives the
    /// offsets' kind too) and `offsets` hold one value per bucket.
    ///
    /// # Safety
    /// As [`ColumnReadback::enqueue_raw`], for the sources, the counts and the offsets.
    pub unsafe fn enqueue_raw(
        &self,
        stream: &CudaStream,
        after: Option<&CudaEvent>,
        sources: &[ColumnSource],
        counts: RawCount,
        offsets: CUdeviceptr,
    ) -> Result<ColumnTicket> {
        let slots = self.engine.slots();
        slots.check_stream(stream)?;
        let after = after.map(|e| slots.check_event(e)).transpose()?;
        // SAFETY: per the contract; the stream and event are of this context (checked).
        unsafe { self.enqueue_raw_stream(stream.cu_stream(), after, sources, counts, offsets) }
    }

    /// [`BucketReadback::enqueue_raw`] on raw driver handles, as
    /// [`ColumnReadback::enqueue_raw_stream`]: the path of the C API's `srb_enqueue_buckets`.
    /// The stream is checked to belong to this readback's context, and every address to be
    /// device memory of it.
    ///
    /// # Safety
    /// As [`BucketReadback::enqueue_raw`] for the memory; `stream` (unless null) and `after`
    /// are live handles, and `after` belongs to this readback's context.
    pub unsafe fn enqueue_raw_stream(
        &self,
        stream: CUstream,
        after: Option<CUevent>,
        sources: &[ColumnSource],
        counts: RawCount,
        offsets: CUdeviceptr,
    ) -> Result<ColumnTicket> {
        // SAFETY: per the contract; enqueue_buckets_raw checks the stream and every address.
        let lease = unsafe {
            self.engine
                .enqueue_buckets_raw(stream, after, sources, counts, offsets)?
        };
        let fill = Fill::Pack {
            kind: counts.kind(),
            lens: Sources::new(sources).lens(),
        };
        Ok(ColumnTicket::from_core(
            self.engine.ticket(lease, fill),
            self.schema.clone(),
        ))
    }
}

/// A placeholder for the unused entries of the erased-source array.
struct NoBuffer;
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

/// One enqueued multi-column readback; holds its slot until dropped.
///
/// Wait on it ([`ColumnTicket::wait`]) or poll it ([`ColumnTicket::try_wait`]), then read the
/// count and columns through the [`ColumnReadout`] it returns, which borrows the ticket: the
/// slot is not reused until the ticket is dropped, so a readout's data can never be
/// overwritten. Dropping a ticket without waiting is fine: the slot's next use waits on the
/// device for this one, and the memory is freed only after it completes.
#[derive(Debug)]
pub struct ColumnTicket {
    core: TicketCore,
    schema: Arc<ColumnSchema>,
}

impl ColumnTicket {
    pub(crate) fn from_core(core: TicketCore, schema: Arc<ColumnSchema>) -> Self {
        ColumnTicket { core, schema }
    }

    /// Sequence number of this readback (unique within its readback, from 1).
    pub fn seq(&self) -> u64 {
        self.core.seq()
    }
    /// The slot it occupies: the next free one after the previous enqueue's, round robin.
    pub fn slot(&self) -> usize {
        self.core.slot()
    }

    /// Blocks until the readback is complete, then returns its count and columns.
    ///
    /// Errors: the count's errors ([`Error::CountExceedsCapacity`], [`Error::NegativeCount`],
    /// [`Error::CountExceedsSource`]); [`Error::Cuda`] when the device reports an error (e.g.
    /// the producer kernel faulted), never a hang.
    pub fn wait(&self) -> Result<ColumnReadout<'_>> {
        let view = self.core.wait_until(None)?;
        Ok(ColumnReadout::new(view, &self.schema))
    }

    /// Like [`ColumnTicket::wait`], giving up with [`Error::Timeout`] after `timeout`; the
    /// ticket stays valid. A timeout too large to add to the current time (e.g.
    /// `Duration::MAX`) means no limit.
    pub fn wait_timeout(&self, timeout: Duration) -> Result<ColumnReadout<'_>> {
        let view = self.core.wait_timeout(timeout)?;
        Ok(ColumnReadout::new(view, &self.schema))
    }

    /// The readout if the readback is complete, `None` while it is in flight.
    pub fn try_wait(&self) -> Result<Option<ColumnReadout<'_>>> {
        Ok(self
            .core
            .try_wait()?
            .map(|v| ColumnReadout::new(v, &self.schema)))
    }
}

/// The host's view of a completed multi-column readback: the count and every column as a
/// slice of exactly that many elements, in pinned host memory. Borrows what holds the slot
/// (a [`ColumnTicket`], an [`crate::AppendTicket`] or a [`crate::Replay`]), so no slice of it
/// outlives the slot. Not `Copy`: it is the borrow.
#[derive(Debug)]
pub struct ColumnReadout<'a> {
    view: SlotView<'a>,
    schema: &'a ColumnSchema,
}

impl<'a> ColumnReadout<'a> {
    pub(crate) fn new(view: SlotView<'a>, schema: &'a ColumnSchema) -> Self {
        ColumnReadout { view, schema }
    }

    /// The count the device held (rows in every column).
    pub fn count(&self) -> usize {
        self.view.rows()
    }
    /// The readback's sequence number.
    pub fn seq(&self) -> u64 {
        self.view.seq()
    }
    /// The columns' declarations.
    pub fn schema(&self) -> &'a ColumnSchema {
        self.schema
    }

    /// Column `c` as `count` elements of `T`.
    ///
    /// # Panics
    /// If `c` is the handle of another schema's column (a programming error, like an index
    /// out of bounds). [`ColumnReadout::try_column`] returns an error instead.
    pub fn column<T: Element>(&self, c: Column<T>) -> &'a [T] {
        match self.try_column(c) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    /// Column `c` as `count` elements of `T`, or [`Error::SchemaMismatch`] if `c` belongs to
    /// another schema.
    pub fn try_column<T: Element>(&self, c: Column<T>) -> Result<&'a [T]> {
        if c.schema != self.schema.id {
            return Err(Error::schema(format!(
                "the handle of column {} belongs to another schema",
                c.index
            )));
        }
        self.column_as::<T>(c.index)
    }

    /// Column `index` as `count` elements of `T`, checked against the declared type (for a
    /// typed column) or element size (for a [`ColumnSchema::raw_column`]).
    ///
    /// Errors: [`Error::SchemaMismatch`] for another type or size, a column out of range, or a
    /// bucketed readback (whose buckets are separate: read them with
    /// [`ColumnReadout::bucket_column`]).
    pub fn column_as<T: Element>(&self, index: usize) -> Result<&'a [T]> {
        self.schema.check_type::<T>(index)?;
        self.whole()?;
        // SAFETY: T is the column's type (or, for raw columns, has its size and an alignment
        // <= 16) and valid for any bits (Element).
        Ok(unsafe { self.view.column::<T>(index) })
    }

    /// Column `index`'s `count * elem_size` bytes (not for bucketed readbacks).
    pub fn column_bytes(&self, index: usize) -> Result<&'a [u8]> {
        self.whole()?;
        self.view
            .column_bytes(index)
            .ok_or_else(|| self.no_column(index))
    }

    fn no_column(&self, index: usize) -> Error {
        Error::schema(format!(
            "column {index} does not exist: the readback has {} column(s)",
            self.schema.len()
        ))
    }

    /// Errors for a bucketed readout, whose columns are not one run of rows.
    fn whole(&self) -> Result<()> {
        match self.view.buckets() {
            1 => Ok(()),
            k => Err(Error::schema(format!(
                "the readback has {k} buckets: read each with bucket_column"
            ))),
        }
    }

    /// Buckets of the readback (1 unless bucketed).
    pub fn buckets(&self) -> usize {
        self.view.buckets()
    }

    /// Rows of bucket `b` in the slot, or `None` past the last bucket. (For an overflowed
    /// append readout from `partial`, at most the capacity.)
    pub fn bucket_count(&self, b: usize) -> Option<usize> {
        self.view.bucket_rows(b)
    }

    /// Column `c`'s rows of bucket `b`, as `T`.
    ///
    /// # Panics
    /// If `c` belongs to another schema or `b` is past the last bucket (programming errors);
    /// [`ColumnReadout::try_bucket_column`] returns an error instead.
    pub fn bucket_column<T: Element>(&self, c: Column<T>, b: usize) -> &'a [T] {
        match self.try_bucket_column(c, b) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    /// Column `c`'s rows of bucket `b`, or [`Error::SchemaMismatch`].
    pub fn try_bucket_column<T: Element>(&self, c: Column<T>, b: usize) -> Result<&'a [T]> {
        if c.schema != self.schema.id {
            return Err(Error::schema(format!(
                "the handle of column {} belongs to another schema",
                c.index
            )));
        }
        self.bucket_column_as::<T>(c.index, b)
    }

    /// Column `index`'s rows of bucket `b` as `T`, checked as [`ColumnReadout::column_as`].
    pub fn bucket_column_as<T: Element>(&self, index: usize, b: usize) -> Result<&'a [T]> {
        self.schema.check_type::<T>(index)?;
        self.check_bucket(b)?;
        // SAFETY: T is the column's type (checked) and valid for any bits; b is a bucket.
        Ok(unsafe { self.view.bucket_column::<T>(index, b) })
    }

    /// Column `index`'s bytes of bucket `b`.
    pub fn bucket_column_bytes(&self, index: usize, b: usize) -> Result<&'a [u8]> {
        self.check_bucket(b)?;
        self.view
            .bucket_bytes(index, b)
            .ok_or_else(|| self.no_column(index))
    }

    fn check_bucket(&self, b: usize) -> Result<()> {
        if b < self.view.buckets() {
            Ok(())
        } else {
            Err(Error::schema(format!(
                "bucket {b} does not exist: the readback has {} bucket(s)",
                self.view.buckets()
            )))
        }
    }
}

// Compile-time proof of the thread-safety claims in the docs.
const _: () = {
    const fn send_sync<X: Send + Sync>() {}
    send_sync::<ColumnReadback>();
    send_sync::<BucketReadback>();
    send_sync::<ColumnTicket>();
    send_sync::<ColumnReadout<'static>>();
    send_sync::<Column<f64>>();
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_index_their_schema_in_order() {
        let mut s = ColumnSchema::new();
        let a = s.column::<f64>();
        let b = s.column::<[f32; 3]>();
        let c = s.raw_column(2);
        assert_eq!((a.index(), b.index(), c), (0, 1, 2));
        assert_eq!(s.elem_sizes(), vec![8, 12, 2]);
        assert_eq!(s.columns()[1].type_name, Some("[f32; 3]"));
        assert_eq!(s.columns()[2].type_name, None);
        assert!(s.validate().is_ok());
    }

    #[test]
    fn type_checks() {
        let mut s = ColumnSchema::new();
        s.column::<f64>();
        s.raw_column(4);
        assert!(s.check_type::<f64>(0).is_ok());
        assert!(s.check_type::<u64>(0).is_err(), "same size, other type");
        assert!(s.check_type::<i32>(1).is_ok());
        assert!(s.check_type::<f32>(1).is_ok(), "raw columns check the size");
        assert!(s.check_type::<u16>(1).is_err());
        assert!(s.check_type::<f64>(2).is_err(), "no such column");
    }

    #[test]
    fn schemas_with_no_or_too_many_columns_are_rejected() {
        assert!(ColumnSchema::new().validate().is_err());
        let mut s = ColumnSchema::new();
        for _ in 0..MAX_COLUMNS {
            s.column::<u8>();
        }
        assert!(s.validate().is_ok());
        s.column::<u8>();
        assert!(matches!(s.validate(), Err(Error::InvalidConfig { .. })));
    }

    #[test]
    fn each_schema_has_its_own_identity() {
        let (a, b) = (ColumnSchema::new(), ColumnSchema::new());
        assert_ne!(a.id, b.id);
        assert_eq!(a.clone().id, a.id);
    }

    /// A device buffer of `len` elements that only binding may touch (no driver call).
    struct HostOnly(usize);

    impl ErasedDevicePtr for HostOnly {
        fn len(&self) -> usize {
            self.0
        }
        fn context(&self) -> CUcontext {
            std::ptr::null_mut()
        }
        fn device_ptr<'s>(&'s self, _: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>) {
            unreachable!("binding makes no driver call")
        }
    }

    fn src<T: Element>(c: Column<T>, len: usize) -> Source<'static> {
        c.bound(Box::new(HostOnly(len)))
    }

    fn bind_error(schema: &ColumnSchema, sources: &[Source<'_>]) -> String {
        match schema.bind(sources) {
            Ok(_) => panic!("{sources:?} accepted"),
            Err(e @ Error::SchemaMismatch { .. }) => e.to_string(),
            Err(e) => panic!("wrong error {e}"),
        }
    }

    #[test]
    fn binding_puts_sources_in_column_order() {
        let mut s = ColumnSchema::new();
        let a = s.column::<f64>();
        let b = s.column::<[u8; 3]>();
        let sources = [src(b, 7), src(a, 5)];
        let order = s.bind(&sources).unwrap();
        let lens: Vec<_> = order.iter().flatten().map(|s| s.data.len()).collect();
        assert_eq!(lens, [5, 7]);
        assert!(order[2..].iter().all(Option::is_none));
    }

    #[test]
    fn binding_rejects_missing_doubled_and_foreign_handles() {
        let mut s = ColumnSchema::new();
        let a = s.column::<f32>();
        let b = s.column::<i64>();
        let mut other = ColumnSchema::new();
        let z = other.column::<f32>();
        assert!(bind_error(&s, &[src(a, 4)]).contains("column 1 has no source"));
        assert!(bind_error(&s, &[src(a, 4), src(a, 4), src(b, 4)]).contains("bound twice"));
        assert!(bind_error(&s, &[src(z, 4), src(b, 4)]).contains("another schema"));
    }

    /// The review's case: a clone shares the identity, so its handle for column 0 passes
    /// the identity check; the type check stops a u8 buffer from standing in for a column
    /// of 32-byte elements (the kernel would read 32 times its length).
    #[test]
    fn a_clones_handle_of_another_type_is_rejected_before_any_driver_call() {
        let mut a = ColumnSchema::new();
        let mut b = a.clone();
        a.column::<[f64; 4]>();
        let small = b.column::<u8>();
        let msg = bind_error(&a, &[src(small, 100)]);
        assert!(
            msg.contains("column 0 holds [f64; 4] (32 bytes)") && msg.contains("u8 (1 bytes)"),
            "{msg}"
        );
        // Same size, other type: rejected too (typed columns check the type).
        let mut c = ColumnSchema::new();
        let mut d = c.clone();
        c.column::<f64>();
        let as_u64 = d.column::<u64>();
        assert!(bind_error(&c, &[src(as_u64, 8)]).contains("holds f64"));
        // Same type through a clone: accepted (the clone is the same schema).
        let mut e = ColumnSchema::new();
        let x = e.column::<i32>();
        let f = e.clone();
        assert!(f.bind(&[src(x, 3)]).is_ok());
    }

    #[test]
    fn raw_columns_are_bound_by_element_size() {
        let mut a = ColumnSchema::new();
        let mut b = a.clone();
        a.raw_column(8);
        let mut c = b.clone();
        let same_size = b.column::<u64>();
        let smaller = c.column::<u32>();
        assert!(a.bind(&[src(same_size, 2)]).is_ok());
        let msg = bind_error(&a, &[src(smaller, 2)]);
        assert!(msg.contains("untyped elements (8 bytes)"), "{msg}");
    }

    /// Breaks `Element`'s alignment rule on purpose, to show the schema catches it. Never
    /// read back: the readback is refused.
    #[derive(Clone, Copy)]
    #[repr(C, align(32))]
    struct OverAligned([u8; 32]);
    // SAFETY: plain bytes, valid for any bits; the alignment above 16 violates the trait's
    // contract deliberately, and the test never views memory as this type.
    unsafe impl Element for OverAligned {}

    #[test]
    fn elements_aligned_above_16_bytes_are_rejected() {
        let mut s = ColumnSchema::new();
        s.column::<u128>();
        s.column::<[f32; 4]>();
        assert!(s.validate().is_ok(), "16-byte alignment is fine");
        s.column::<OverAligned>();
        match s.validate() {
            Err(Error::InvalidConfig { .. }) => {}
            other => panic!("over-aligned column accepted: {other:?}"),
        }
        assert!(s.validate().unwrap_err().to_string().contains("column 2"));
    }
}
