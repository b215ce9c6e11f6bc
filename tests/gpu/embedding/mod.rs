//! Embedding in a simulation loop: several columns with one count, and CUDA graph capture and
//! replay (the C API's are in `capi/tests/capi/graph_mode.rs`).
//!
//! The graph tests run alone: graph capture and the context-wide synchronization a graph
//! readback's drop performs should not interleave with other tests' work, and they time their
//! waits.
//!
//! The tests: `columns` (several columns, one count) and `graph` (capture and replay).
use cudarc::driver::CudaContext;
use std::sync::Arc;
use test_support::{SubjectContext, Test};

mod columns;
mod graph;

use columns::{
    columns_api_misuse, columns_cloned_schema_types_are_checked, columns_count_rules,
    columns_mixed_types, columns_raw_after_an_event,
};
use graph::{
    graph_misuse_is_reported_at_once, graph_overrun_is_detected, graph_record_without_capture,
    graph_replays_the_seed_loop, graph_take_numbers_every_outcome,
};

pub const TESTS: &[Test] = test_support::tests![
    columns_mixed_types,
    columns_count_rules,
    columns_api_misuse,
    columns_cloned_schema_types_are_checked,
    columns_raw_after_an_event,
    graph_replays_the_seed_loop.exclusive(),
    graph_overrun_is_detected.exclusive(),
    graph_record_without_capture.exclusive(),
    graph_misuse_is_reported_at_once.exclusive(),
    graph_take_numbers_every_outcome.exclusive(),
];

/// This subject's context of device 0 (see `test_support::device`).
fn ctx() -> Arc<CudaContext> {
    static CONTEXT: SubjectContext = SubjectContext::new();
    CONTEXT.get()
}
