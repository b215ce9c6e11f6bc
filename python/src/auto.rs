//! `transport="auto"`, which only the binding has for now: a second, staged slot set beside
//! the mapped one, an enqueue going to the set the count read back last chose. Everything it
//! adds to a `Readback` is here, so the core's own `Transport::Auto` can replace this file.
use crate::info::AutoFacts;
use srb::{ColumnReadback, ColumnSchema, ReadbackConfig, StagedCopy, Transport};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The transport's Python name.
pub(crate) const NAME: &str = "auto";

/// An enqueue goes to the staged slots (one DMA of the whole slot) when the count last read
/// back filled at least this many bytes...
pub(crate) const AUTO_STAGED_MIN_BYTES: usize = 4 << 20;
/// ... and at least this share of the capacity; otherwise to the mapped slots (the pack writes
/// exactly `count` rows into pinned host memory). The staged copy moves the whole slot, so it
/// wins only when the count nearly fills it: measured on an H200 from PyTorch at 8.4 MB,
/// mapped moved 37.1 GB/s and the staged copy 42.8, which favours staged past 37.1 / 42.8 =
/// 0.87 of the slot (those rates include the host's enqueue and wait: python/PERF.md); below a
/// few MB the copy's fixed cost (a second operation on the stream) outweighs the difference.
/// `python/bench/bench.py` measures mapped and auto at every size and staged at the capacity.
pub(crate) const AUTO_STAGED_MIN_FILL: f64 = 0.87;

/// The rows from which an auto readback of `capacity` rows of `row_bytes` bytes goes staged.
fn threshold(capacity: usize, row_bytes: usize) -> usize {
    let by_bytes = AUTO_STAGED_MIN_BYTES.div_ceil(row_bytes.max(1));
    let by_fill = (capacity as f64 * AUTO_STAGED_MIN_FILL).ceil() as usize;
    by_bytes.max(by_fill).max(1)
}

/// The staged set's config for the mapped set's `config`: made only where a count can reach
/// the threshold `staged_from`, so a readback whose counts never can allocates none.
fn staged_config(
    config: &ReadbackConfig,
    staged_copy: StagedCopy,
    staged_from: usize,
) -> Option<ReadbackConfig> {
    (staged_from <= config.capacity).then(|| {
        config
            .clone()
            .transport(Transport::Staged)
            .staged_copy(staged_copy)
    })
}

/// The mapped set's config: `config` as given, its staged copy `Auto` (the mapped set copies
/// nothing, and would refuse an explicit `"sized"`, which is the staged set's).
pub(crate) fn mapped_config(config: ReadbackConfig) -> ReadbackConfig {
    config
        .transport(Transport::Mapped)
        .staged_copy(StagedCopy::Auto)
}

/// What a new auto readback makes beside its mapped set, decided before any driver call.
pub(crate) struct Plan {
    staged: Option<ReadbackConfig>,
    staged_copy: StagedCopy,
    staged_from: usize,
}

impl Plan {
    /// For the mapped set's `config`, rows of `row_bytes` bytes, and the staged set's copy.
    pub(crate) fn new(config: &ReadbackConfig, staged_copy: StagedCopy, row_bytes: usize) -> Self {
        let staged_from = threshold(config.capacity, row_bytes);
        Plan {
            staged: staged_config(config, staged_copy, staged_from),
            staged_copy,
            staged_from,
        }
    }

    /// The core's checks of the staged set's settings (none without one).
    pub(crate) fn check(&self, schema: &ColumnSchema) -> srb::Result<()> {
        self.staged
            .as_ref()
            .map_or(Ok(()), |c| ColumnReadback::check(schema, c))
    }

    /// Makes the staged set, if planned.
    pub(crate) fn make(
        self,
        ctx: &Arc<srb::cudarc::driver::CudaContext>,
        schema: &ColumnSchema,
    ) -> srb::Result<Auto> {
        let staged = match self.staged {
            Some(c) => Some(Arc::new(ColumnReadback::new(ctx, schema, c)?)),
            None => None,
        };
        Ok(Auto {
            staged: Mutex::new(staged),
            staged_copy: self.staged_copy,
            staged_from: AtomicUsize::new(self.staged_from),
        })
    }
}

/// A `Readback`'s second slot set under `transport="auto"`.
pub(crate) struct Auto {
    /// The staged slots beside the mapped ones, made only while the threshold (`staged_from`)
    /// is within the capacity; replaced by `grow`. Cloned out of the lock by each enqueue
    /// (tickets hold their slots through the core, not through this).
    staged: Mutex<Option<Arc<ColumnReadback>>>,
    /// The staged set's copy (`staged_copy=`), for the sets `grow` makes.
    staged_copy: StagedCopy,
    /// The last count from which enqueues go staged.
    staged_from: AtomicUsize,
}

impl Auto {
    /// The staged set, if made.
    pub(crate) fn staged_set(&self) -> Option<Arc<ColumnReadback>> {
        self.staged
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The slot sets an enqueue tries, in order: the one the count read back last
    /// (`last_rows`) chooses, then the other (if made).
    pub(crate) fn order<'a>(
        &self,
        mapped: &'a ColumnReadback,
        staged: Option<&'a ColumnReadback>,
        last_rows: usize,
    ) -> (&'a ColumnReadback, Option<&'a ColumnReadback>) {
        match staged {
            Some(st) if last_rows >= self.staged_from.load(Ordering::Relaxed) => (st, Some(mapped)),
            Some(st) => (mapped, Some(st)),
            None => (mapped, None),
        }
    }

    /// `grow` of both sets to `capacity` rows: the new staged set first (if the new capacity
    /// lets a count reach the threshold), then the mapped slots. Either failing leaves both
    /// sets as they were.
    pub(crate) fn grow(
        &self,
        mapped: &ColumnReadback,
        ctx: &Arc<srb::cudarc::driver::CudaContext>,
        schema: &ColumnSchema,
        capacity: usize,
        row_bytes: usize,
    ) -> srb::Result<()> {
        let staged_from = threshold(capacity, row_bytes);
        let config = ReadbackConfig::new(capacity).slots(mapped.info().slots);
        let new_staged = match staged_config(&config, self.staged_copy, staged_from) {
            Some(c) => Some(Arc::new(ColumnReadback::new(ctx, schema, c)?)),
            None => None,
        };
        mapped.grow(capacity)?;
        let old = std::mem::replace(
            &mut *self.staged.lock().unwrap_or_else(|p| p.into_inner()),
            new_staged,
        );
        self.staged_from.store(staged_from, Ordering::Relaxed);
        // Freed outside the lock (the caller restores its context after).
        drop(old);
        Ok(())
    }

    /// The count from which an enqueue goes to the staged slots.
    pub(crate) fn staged_from(&self) -> usize {
        self.staged_from.load(Ordering::Relaxed)
    }

    /// Staged slots held now.
    pub(crate) fn slots_in_use(&self) -> usize {
        self.staged_set().map_or(0, |s| s.slots_in_use())
    }

    /// What `info` reports of the staged set.
    pub(crate) fn facts(&self) -> AutoFacts {
        let staged = self.staged_set();
        AutoFacts {
            staged_copy: staged.as_ref().and_then(|st| st.info().staged_copy),
            staged_slots: staged.map_or(0, |s| s.info().slots),
        }
    }
}
