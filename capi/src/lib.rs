//! The C API of sized-readback: the `srb_*` functions that `include/sized_readback.h` declares,
//! on the library's public API. `sized-readback-clib` (`clib/`) links them into
//! `libsized_readback.{a,so}`; cbindgen generates the header from this crate
//! (`cbindgen.toml`; `tests/c_header.rs` fails when the checked-in header is stale).
//!
//! Handles are raw driver-API values, equal to the runtime API's in the same context: a device
//! pointer is an `unsigned long long` (`CUdeviceptr`), a stream a `struct CUstream_st *`
//! (`CUstream`, `cudaStream_t`), an event a `struct CUevent_st *` (`CUevent`, `cudaEvent_t`),
//! so the header needs no CUDA header. A readback lives in the *primary* context of its
//! device, the one the CUDA runtime uses.
//!
//! Every function returns an `SRB_*` code (0 success, > 0 "not yet", < 0 an error, one code
//! per kind of error); after an error, `srb_last_error()` gives this thread's message (valid
//! until this thread's next failing `srb_` call). No Rust panic crosses the boundary: one
//! becomes `SRB_ERR_PANIC`. Every function may be called from any thread.
//!
//! A readback made without `SRB_FLAG_GRAPH` is *host-sequenced*: `srb_enqueue` (or
//! `srb_append_begin`) returns the readback's sequence number, which `srb_poll`, `srb_wait`,
//! `srb_count`, `srb_data` and `srb_release` take. One made with `SRB_FLAG_GRAPH` is
//! *device-sequenced*, for CUDA graphs: `srb_record` records the pack into a capturing stream
//! (or kernels use `srb_append_desc_graph`'s descriptor), and `srb_next` returns the next
//! replay's sequence number, which `srb_count`, `srb_data` and `srb_release` take.
//!
//! The files, by area: `codes` (the return codes, and the code of each kind of error),
//! `types` (the C types and constants), `boundary` (errors and panics to codes),
//! `last_error` (`srb_last_error`), `args` (C arguments to Rust values), `held` (the
//! readbacks a caller holds), `handle` (the readback handle, which owns them and finds one by
//! number), then one file per group of calls: `create`, `enqueue`, `append`, `graph`, `wait`,
//! `data`, `spill`, `release`. Each file imports only files listed before it (`create` and the
//! calls after it aside, which none import but `graph`, which uses `wait`): `cargo xtask
//! cycles` fails on an import cycle here.
#![allow(non_camel_case_types)]
// The workspace's lints (the root Cargo.toml) apply; this one only to libraries, whose
// test and tool targets share helper modules that it would flag.
#![deny(unreachable_pub)]

mod allocations;
mod append;
mod args;
mod boundary;
mod codes;
mod create;
mod data;
mod enqueue;
mod graph;
mod handle;
mod held;
mod last_error;
mod release;
mod sized_launch;
mod spill;
mod types;
mod wait;

pub use allocations::{srb_allocations, srb_live_allocations};
pub use append::{srb_append_begin, srb_append_desc_graph, srb_append_end};
pub use codes::*;
pub use create::{
    srb_create, srb_create_append, srb_create_buckets, SRB_FLAG_APPEND, SRB_FLAG_AUTO,
    SRB_FLAG_GRAPH, SRB_FLAG_STAGED, SRB_FLAG_STAGED_SIZED, SRB_FLAG_STAGED_WHOLE,
};
pub use data::{srb_bucket_data, srb_count, srb_data};
pub use enqueue::{srb_enqueue, srb_enqueue_buckets};
pub use graph::{srb_next, srb_record};
pub use handle::{
    srb_buckets, srb_capacity, srb_destroy, srb_readback, srb_staged_copy, SRB_COPY_NONE,
    SRB_COPY_SIZED, SRB_COPY_WHOLE,
};
pub use last_error::srb_last_error;
pub use release::srb_release;
pub use sized_launch::{
    srb_sized_body, srb_sized_launch, srb_sized_launch_classes, srb_sized_launch_create,
    srb_sized_launch_create_exact_grid, srb_sized_launch_destroy, srb_sized_launch_enqueue,
    srb_sized_launch_recorded, srb_sized_launch_wait,
};
pub use spill::{srb_fetch_spill, srb_spill_bucket_data, srb_spill_data};
pub use types::*;
pub use wait::{srb_poll, srb_wait};
