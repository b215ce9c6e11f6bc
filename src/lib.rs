//! # sized-readback
//!
//! Bring a variable number of results back from a CUDA GPU when the count itself lives in
//! device memory, without the host reading the count first.
//!
//! A kernel writes a count and that many elements. Two back-to-back `cudaMemcpyAsync` calls
//! read a stale size (the second copy's size is taken when it is enqueued);
//! `cudaStreamSynchronize` between them blocks the host thread; a stream callback that issues
//! the second copy is forbidden by CUDA. Here a small pack kernel reads the count on the
//! device and copies the data into a fixed-size *slot* of pinned host memory, with a
//! trailing header (the *trailer*) that carries the count. The host waits on the trailer or
//! one event and then holds both.
//!
//! ```no_run
//! use sized_readback::{Readback, ReadbackConfig};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = sized_readback::device::open(0)?;           // an error, not a panic, without a GPU
//! let stream = ctx.new_stream()?;
//! let data = stream.alloc_zeros::<f64>(1 << 20)?;       // a kernel fills data[..n]...
//! let count = stream.alloc_zeros::<i32>(1)?;            // ...and writes n here
//! let readback = Readback::<f64>::with_config(&ctx, ReadbackConfig::new(1 << 20).slots(2))?;
//! let ticket = readback.enqueue(&stream, &data, &count)?; // returns at once
//! // ... launch the next kernel here: nothing waited for the count ...
//! let out = ticket.wait()?;                              // count and data, from pinned memory
//! println!("{} elements: {:?}", out.count(), &out[..out.count().min(4)]);
//! # Ok(()) }
//! ```
//!
//! Or the kernel writes its rows and count into the slot itself ([`append`]): no count in
//! device memory and no second kernel.
//!
//! The types: [`Readback`] (one column of `T`), [`ColumnReadback`] (several columns that share
//! one count), [`BucketReadback`] (k buckets of those columns in one slot, each with its own
//! count, e.g. one per MPI neighbour), [`AppendReadback`] (filled by the user's kernel through
//! the append header), [`GraphReadback`] (recorded into a CUDA graph and replayed). Every ticket holds its slot, and
//! every readout borrows its ticket, so no slice outlives the slot it points into.
//!
//! # Lifetimes that hold
//! A readout cannot outlive its ticket:
//! ```compile_fail
//! # fn f(rb: &sized_readback::Readback<f64>, s: &cudarc::driver::CudaStream,
//! #      d: &cudarc::driver::CudaSlice<f64>, n: &cudarc::driver::CudaSlice<i32>) -> sized_readback::Result<()> {
//! let out = rb.enqueue(s, d, n)?.wait()?; // the ticket is a temporary, dropped here
//! println!("{}", out.count());
//! # Ok(()) }
//! ```
//! More of these rules are proven by the compile-fail tests in `tests/compile_fail/`.
//!
//! # Features
//! - `nvrtc`: `append::compile`, `append::compile_for` and `append::cubin_for`, which
//!   compile a kernel that includes the append header with NVRTC, loaded at run time as the
//!   driver is (no build-time toolkit), to machine code for the device.
// The workspace's lints (the root Cargo.toml) apply; this one only to libraries, whose
// test and tool targets share helper modules that it would flag.
#![deny(unreachable_pub)]

pub mod allocations;
pub mod append;
pub mod auto;
mod buckets;
mod columns;
mod config;
pub mod device;
mod element;
mod engine;
mod error;
mod graph;
mod info;
mod kernel_image;
mod launch;
mod layout;
mod raw;
mod readback;
mod schema;
mod sized_launch;
mod source;
mod stream_join;
mod ticket;

#[cfg(feature = "__internal-api")]
#[doc(hidden)]
#[path = "internal.rs"]
pub mod __internal;

#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod testing;

pub use append::{AppendDesc, AppendReadback, AppendTicket, PendingAppend};
pub use buckets::BucketReadback;
pub use columns::ColumnReadback;
pub use config::{ReadbackConfig, StagedCopy, Transport, WaitMode};
pub use cudarc;
pub use element::{CountKind, CountType, Element};
pub use error::{Error, Result};
pub use graph::{GraphReadback, OwnedReplay, Replay, Taken};
pub use info::ReadbackInfo;
pub use kernel_image::{ImageKind, KernelImage, KERNEL_TARGETS};
pub use launch::LaunchShape;
pub use layout::{SlotLayout, MAX_BUCKETS, MAX_COLUMNS};
pub use readback::{Readback, Readout, Ticket};
pub use schema::{Column, ColumnSchema, ColumnSpec, Source};
pub use sized_launch::{LaunchOutcome, SizeClass, SizedLaunch, SizedLaunchBuilder, SizedTicket};
pub use source::{ColumnSource, RawCount};
pub use stream_join::StreamJoin;
pub use ticket::{ColumnReadout, ColumnTicket};

/// The README's Rust examples, compiled as doctests (`cargo test --doc`) so that they keep
/// compiling against the current API; the ones that need a GPU are `no_run`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
