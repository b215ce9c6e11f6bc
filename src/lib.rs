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
//! Layering, as in cudarc: [`abi`] is the slot layout generated from the kernels' header,
//! [`driver`] holds thin checked driver calls, and [`Readback`], [`Ticket`] and [`Readout`]
//! are the safe API. [`kernels`] loads the embedded fatbin; [`layout`] and [`ring`] are the
//! host-side slot arithmetic and slot state machine.
#![warn(missing_docs)]

pub mod abi;
pub mod capi;
pub mod columns;
pub mod device;
pub mod driver;
pub mod element;
pub mod error;
pub mod graph;
pub mod kernels;
pub mod layout;
pub mod pattern;
pub mod pinned;
pub mod readback;
pub mod ring;
pub mod seed;

pub use columns::{Column, ColumnReadback, ColumnReadout, ColumnSchema, ColumnTicket};
pub use cudarc;
pub use element::{CountKind, CountType, Element};
pub use error::{Error, Result};
pub use graph::{GraphReadback, Replay};
pub use readback::{ColumnSource, Readback, ReadbackConfig, Readout, Ticket, Transport, WaitMode};
