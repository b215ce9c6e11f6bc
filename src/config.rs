//! Settings of a readback: capacity, slots, transport, wait mode, launch options.

/// How the slot reaches the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Transport {
    /// The kernel writes count and data straight into pinned, device-mapped host memory: only
    /// the `count` rows and the trailer cross the bus. The default.
    #[default]
    Mapped,
    /// The kernel writes into a device-side slot, then one device-to-host copy moves it into
    /// pinned host memory: on CUDA 12.8+ drivers a copy of the rows the count needs (rounded up
    /// to a power of two), chosen on the device; elsewhere, and for appends and buckets, the
    /// whole slot ([`StagedCopy`]). For hosts or setups where mapped memory is unavailable or
    /// slow, or where the host must not be written by the GPU's stores.
    Staged,
    /// For [`crate::Readback`] and [`crate::ColumnReadback`]: mapped slots, and staged slots
    /// beside them where a count within the capacity can nearly fill a large slot (there one
    /// copy of the slot beats the pack's mapped stores). Each enqueue goes to the set that the
    /// count the readback last read back chooses, the other if that set's slots are all held;
    /// [`crate::ReadbackInfo::auto_staged_from`] gives the count from which it is the staged
    /// one, [`crate::ColumnTicket::transport`] which set a ticket went to. The staged slots
    /// wait on their event whatever the wait mode; `staged_copy` is theirs, and where it is
    /// [`StagedCopy::Auto`] they copy the whole slot (they serve nearly full slots, whose sized
    /// copy would take its top class, run slower by the driver). The thresholds are
    /// measured, not guessed: [`crate::auto`]. Each set has `slots` slots, so up to twice as
    /// many readbacks may be held; [`crate::ReadbackInfo`]'s `slots` and `wait_mode`, and
    /// [`crate::Error::SlotsExhausted`]'s count, are the mapped set's. Every other readback type
    /// has one slot set and takes the mapped transport.
    Auto,
}

/// How the staged transport copies a slot to the host. Mapped readbacks copy nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum StagedCopy {
    /// [`StagedCopy::Sized`] where the driver and the readback allow it (and the driver
    /// accepts its kernel image and graph) and programmatic launch is not asked for, else
    /// [`StagedCopy::Whole`]; for the staged slots of [`Transport::Auto`], always
    /// [`StagedCopy::Whole`] (they serve nearly full slots). The default.
    #[default]
    Auto,
    /// One fixed-size copy of the whole slot (capacity rows of every column, and the trailer)
    /// after the pack: works on every driver, costs the capacity's bytes whatever the count.
    Whole,
    /// The copy's size follows the count, chosen on the device: each slot has a CUDA graph of
    /// the pack and a SWITCH node whose body `k` copies `min(2^k, capacity)` rows of every
    /// column and the trailer, and the pack picks the body. Needs a driver of CUDA 12.8 or
    /// newer (graph conditionals set from a kernel); packs of one bucket only (appends and
    /// bucket packs copy the whole slot). The pack runs in the graph, never with programmatic
    /// dependent launch, so not where that launch is forced on (`programmatic_launch(true)`).
    /// Asked for where it is unavailable, or where the driver fails to build its kernel image
    /// or graphs, creation fails with [`crate::Error::SizedCopyUnavailable`] (with the
    /// driver's error, if one failed).
    Sized,
}

/// How a ticket waits for its readback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WaitMode {
    /// [`WaitMode::Trailer`] for the mapped transport, [`WaitMode::Event`] for the staged one.
    #[default]
    Auto,
    /// Spin on the trailer's sequence number in mapped memory (lowest latency; one CPU core
    /// busy while waiting). The slot's event is queried now and then, so device errors end
    /// the wait. Mapped transport only.
    Trailer,
    /// `cuEventSynchronize` on the event recorded after the readback (with a timeout: polls
    /// `cuEventQuery`). Whether it spins or sleeps follows the context's scheduling flags.
    Event,
}

/// Settings of a readback. `ReadbackConfig::new(capacity)` gives 2 slots, the mapped
/// transport and automatic choices for the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadbackConfig {
    /// Rows (elements of every column) one slot holds. At least 1.
    pub capacity: usize,
    /// Readbacks that can be in flight or held at once. At least 1.
    pub slots: usize,
    /// See [`Transport`].
    pub transport: Transport,
    /// See [`WaitMode`].
    pub wait: WaitMode,
    /// Launch the pack kernel with programmatic dependent launch, so it starts while the
    /// producer kernel before it in the stream drains. `None`: on when the device has compute
    /// capability 9.0+ and the loaded pack kernel was compiled for compute_90+ (so it waits
    /// for the producer with `griddepcontrol.wait`), unless the environment variable
    /// `SIZED_READBACK_PDL` is `0` (an escape hatch for tools such as compute-sanitizer's
    /// racecheck, which lost track of such launches on the H200). `Some(true)` on a pack
    /// kernel without the wait, or for a graph readback, is an [`crate::Error::InvalidConfig`].
    ///
    /// The staged transport's sized copy ([`StagedCopy::Sized`]) runs its pack in a CUDA graph,
    /// which starts only after the stream's earlier work: that pack is never launched
    /// programmatically. With `Some(true)`, [`StagedCopy::Auto`] therefore takes the whole-slot
    /// copy, whose pack is, and an explicit [`StagedCopy::Sized`] is a
    /// [`crate::Error::SizedCopyUnavailable`]; with `None` the sized copy is kept and its pack
    /// runs without. [`crate::ReadbackInfo::launch_shape`] says how the pack is launched.
    pub programmatic_launch: Option<bool>,
    /// Most blocks of one pack launch. `None`: 4 per multiprocessor.
    pub max_blocks: Option<u32>,
    /// Append readbacks: rows per slot of the device-side spill region that takes the rows an
    /// append kernel writes past the capacity. `None`: equal to the capacity. `Some(0)`: no
    /// spill region (rows past the capacity are dropped, and counted). Per bucket, bucketed.
    pub spill: Option<usize>,
    /// Buckets of one slot (e.g. one per MPI neighbour), 1 to [`crate::MAX_BUCKETS`]: each has
    /// its own `capacity` rows of every column, and its own count. 1: an ordinary readback.
    pub buckets: usize,
    /// Staged transport: how the slot is copied to the host (see [`StagedCopy`]). The mapped
    /// transport copies nothing: it takes `Auto` and `Whole` as no copy, and refuses `Sized`
    /// ([`crate::Error::SizedCopyUnavailable`]). [`crate::ReadbackInfo::staged_copy`] says which
    /// copy is in use.
    pub staged_copy: StagedCopy,
}

impl ReadbackConfig {
    /// `capacity` rows per slot, 2 slots, mapped transport, automatic wait and launch.
    pub fn new(capacity: usize) -> Self {
        ReadbackConfig {
            capacity,
            slots: 2,
            transport: Transport::Mapped,
            wait: WaitMode::Auto,
            programmatic_launch: None,
            max_blocks: None,
            spill: None,
            buckets: 1,
            staged_copy: StagedCopy::Auto,
        }
    }
    /// Sets the number of slots.
    pub fn slots(mut self, slots: usize) -> Self {
        self.slots = slots;
        self
    }
    /// Sets the transport.
    pub fn transport(mut self, transport: Transport) -> Self {
        self.transport = transport;
        self
    }
    /// Sets the wait mode.
    pub fn wait(mut self, wait: WaitMode) -> Self {
        self.wait = wait;
        self
    }
    /// Forces programmatic dependent launch on or off (on: the staged transport copies the
    /// whole slot, see the field).
    pub fn programmatic_launch(mut self, on: bool) -> Self {
        self.programmatic_launch = Some(on);
        self
    }
    /// Caps the blocks of one pack launch (at least 1: 0 is refused at construction).
    pub fn max_blocks(mut self, blocks: u32) -> Self {
        self.max_blocks = Some(blocks);
        self
    }
    /// Sets the rows of an append readback's spill region per slot (0: none). Pack readbacks
    /// have no spill region and refuse more than 0 rows at construction.
    pub fn spill(mut self, rows: usize) -> Self {
        self.spill = Some(rows);
        self
    }
    /// Sets how the staged transport copies a slot.
    pub fn staged_copy(mut self, copy: StagedCopy) -> Self {
        self.staged_copy = copy;
        self
    }
    /// Sets the number of buckets; `capacity` is then the rows of each bucket.
    pub fn buckets(mut self, buckets: usize) -> Self {
        self.buckets = buckets;
        self
    }
    /// The spill rows in effect: `spill`, or the capacity.
    pub(crate) fn spill_rows(&self) -> usize {
        self.spill.unwrap_or(self.capacity)
    }
}
