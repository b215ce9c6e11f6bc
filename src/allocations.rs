//! The library's own live memory: how many device and pinned host allocations it holds now,
//! counted where they are made and freed (`raw::buffer`). A leak check can tell the library's
//! allocations from its caller's or a framework's with it: after every readback, ticket and
//! readout is dropped (and, in Python, after a `gc.collect()`), both counts are back to what
//! they were before.
use std::sync::atomic::{AtomicUsize, Ordering};

/// The library's allocations alive at one moment, over every context and device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LiveAllocations {
    /// Device memory (`cuMemAlloc`): the staged transports' device slots and block counters.
    pub device: usize,
    /// Their bytes.
    pub device_bytes: usize,
    /// Page-locked host memory (`cuMemHostAlloc`): the slots, mapped or not.
    pub pinned: usize,
    /// Their bytes.
    pub pinned_bytes: usize,
}

/// The allocations the library holds now (a snapshot; others may be made or freed meanwhile).
///
/// ```
/// let now = sized_readback::allocations::live();
/// assert!(now.device_bytes >= now.device); // each allocation holds at least one byte
/// ```
pub fn live() -> LiveAllocations {
    LiveAllocations {
        device: DEVICE.count.load(Ordering::Relaxed),
        device_bytes: DEVICE.bytes.load(Ordering::Relaxed),
        pinned: PINNED.count.load(Ordering::Relaxed),
        pinned_bytes: PINNED.bytes.load(Ordering::Relaxed),
    }
}

/// One kind of allocation's live count and bytes.
pub(crate) struct Counter {
    count: AtomicUsize,
    bytes: AtomicUsize,
}

impl Counter {
    const fn new() -> Self {
        Counter {
            count: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
        }
    }
    /// An allocation of `bytes` was made.
    pub(crate) fn made(&self, bytes: usize) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
    /// An allocation of `bytes` was freed.
    pub(crate) fn freed(&self, bytes: usize) {
        self.count.fetch_sub(1, Ordering::Relaxed);
        self.bytes.fetch_sub(bytes, Ordering::Relaxed);
    }
}

pub(crate) static DEVICE: Counter = Counter::new();
pub(crate) static PINNED: Counter = Counter::new();
