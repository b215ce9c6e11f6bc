//! The lowest layer: the slot ABI generated from the kernels' header, thin checked driver
//! calls, owned device and pinned buffers, events and streams, and the embedded kernels.
//! Crate-private; everything above it goes through these types.
pub(crate) mod abi;
pub(crate) mod buffer;
pub(crate) mod driver;
pub(crate) mod event;
pub(crate) mod grid_graph;
pub(crate) mod images;
pub(crate) mod module;
pub(crate) mod stream;
pub(crate) mod switch_graph;
