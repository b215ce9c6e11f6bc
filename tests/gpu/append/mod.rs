//! Device-side append: user kernels (csrc/testing/append.cu) that append through the shipped
//! header `include/sized_readback/append.cuh`. Rows come back in no particular order, so every
//! test compares them with the host's as multisets, byte by byte.
//!
//! The tests: `host` (host-sequenced), `graph` (graph readbacks), `header` (the shipped header,
//! NVRTC); their helpers: `rows` (the host's rows), `roundtrip` (a launch and a round trip).
use cudarc::driver::CudaContext;
use sized_readback::testing::Kernels;
use std::sync::{Arc, OnceLock};
use test_support::{SubjectContext, Test};

mod graph;
mod header;
mod host;
mod roundtrip;
mod rows;

use graph::{graph_replay, graph_replay_overflow};
use header::{header_is_shipped, nvrtc_kernel_through_the_header};
use host::{
    a_kernel_that_does_not_finish, block_sizes_and_grids, counts_at_the_edges, element_sizes,
    many_cycles_random_counts, misuse_is_reported, several_columns_and_3d_shapes,
};

pub const TESTS: &[Test] = test_support::tests![
    counts_at_the_edges,
    element_sizes,
    block_sizes_and_grids,
    several_columns_and_3d_shapes,
    many_cycles_random_counts,
    a_kernel_that_does_not_finish,
    misuse_is_reported,
    nvrtc_kernel_through_the_header,
    // Alone: each captures a stream and drops a graph readback, whose drop synchronizes the
    // context, which the driver refuses (and which invalidates the capture) while another
    // test's stream captures.
    graph_replay.exclusive(),
    graph_replay_overflow.exclusive(),
    header_is_shipped.cpu(),
];

/// This subject's context of device 0 (see `test_support::device`).
fn ctx() -> Arc<CudaContext> {
    static CONTEXT: SubjectContext = SubjectContext::new();
    CONTEXT.get()
}

fn kernels() -> Kernels {
    static K: OnceLock<Kernels> = OnceLock::new();
    K.get_or_init(|| Kernels::load(&ctx()).expect("the test kernels"))
        .clone()
}

fn sms() -> u32 {
    ctx()
        .attribute(
            cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        )
        .expect("SM count") as u32
}
