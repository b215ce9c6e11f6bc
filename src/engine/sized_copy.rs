//! The staged transport's sized copy ([`crate::StagedCopy::Sized`]): per slot, one
//! instantiated CUDA graph `[srb_pack_switch] -> SWITCH`, whose body `k` copies
//! `min(2^k, capacity)` rows of every column and the trailer from the device slot to the host
//! slot; the pack sets the body from the count it read. Each enqueue sets the kernel node's
//! parameters (sources, count, sequence number) and launches the slot's graph.
//!
//! Why one graph per slot, updated per enqueue, and not a graph per (slot, sources, count):
//! a simulation may hand a different buffer to every enqueue, and a cache keyed on addresses
//! would instantiate a graph on every miss and hold graphs for buffers long freed; the update
//! is one `cuGraphExecKernelNodeSetParams` per enqueue, whatever the buffers.
//!
//! The slot layout stays the one every transport shares (columns, then the trailer), so the
//! append header and the C API read the same bytes: a body holds one copy per column and one
//! of the trailer, run side by side, with neighbours less than a column alignment apart merged
//! into one (the top class is one copy of the whole slot).
use super::pack_params::{pack_params, PackTarget, SlotAt};
use crate::element::CountKind;
use crate::error::{Error, Result};
use crate::launch::LaunchShape;
use crate::layout::{SlotLayout, COLUMN_ALIGN};
use crate::raw::abi;
use crate::raw::buffer::{DeviceBuffer, PinnedBuffer};
use crate::raw::module::{Kernel, Module};
use crate::raw::stream::Stream;
use crate::raw::switch_graph::{self, HostCopy, SwitchGraph};
use crate::source::RawCount;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::CudaContext;
use std::ffi::c_void;
use std::sync::Arc;

/// Size classes of a slot of `capacity` rows: class `k` copies `min(2^k, capacity)` rows, up
/// to the first class that holds the capacity (`ceil(log2(capacity)) + 1` classes).
pub(crate) fn size_classes(capacity: usize) -> usize {
    let capacity = capacity.max(1);
    capacity.next_power_of_two().trailing_zeros() as usize + 1
}

/// The byte ranges `(offset, bytes)` within a slot that class `class` copies: the first
/// `min(2^class, capacity)` rows of each column, and the bucket table (if any) with the
/// trailer; ranges less than a column alignment apart are merged.
pub(crate) fn class_ranges(layout: &SlotLayout, class: usize) -> Vec<(usize, usize)> {
    let rows = (1usize << class.min(usize::BITS as usize - 1)).min(layout.capacity());
    let mut ranges: Vec<(usize, usize)> = layout
        .column_offsets()
        .iter()
        .zip(layout.elem_sizes())
        .map(|(&off, &size)| (off, rows * size))
        .collect();
    let tail = if layout.has_bucket_table() {
        layout.bucket_table_offset()
    } else {
        layout.trailer_offset()
    };
    ranges.push((tail, layout.slot_bytes() - tail));
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(ranges.len());
    for (off, bytes) in ranges {
        match merged.last_mut() {
            Some((o, b)) if off - (*o + *b) < COLUMN_ALIGN => *b = off + bytes - *o,
            _ => merged.push((off, bytes)),
        }
    }
    merged
}

/// One graph per slot, and the kernel they run.
#[derive(Debug)]
pub(crate) struct SizedCopy {
    graphs: Vec<SwitchGraph>,
}

impl SizedCopy {
    /// Builds, instantiates and uploads the graph of every one of `num_slots` slots, copying
    /// from `staging` to `host`, whose packs use the sync records at `slot_sync`. Each graph's
    /// kernel node starts with placeholder sources and count, set per enqueue. Returns, with or
    /// without an error, once the uploads it enqueued are done.
    pub(crate) fn new(
        ctx: &Arc<CudaContext>,
        layout: &SlotLayout,
        num_slots: usize,
        shape: LaunchShape,
        host: &PinnedBuffer,
        staging: &DeviceBuffer,
        slot_sync: CUdeviceptr,
    ) -> Result<Self> {
        let target = PackTarget {
            slots: staging.ptr(),
            slot_sync,
            num_slots,
        };
        let placeholder = RawCount::new(0, CountKind::U64);
        let module = Module::switch(ctx)?;
        let kernel: Kernel = module.function(c"srb_pack_switch")?;
        let classes: Vec<Vec<(usize, usize)>> = (0..size_classes(layout.capacity()))
            .map(|k| class_ranges(layout, k))
            .collect();
        // The uploads go to a stream of their own, synchronized before the readback is handed
        // out (the legacy stream would wait for, and hold up, the context's other work; and
        // not cudarc's `new_stream`, which can synchronize the context: `raw::stream`).
        let upload = Stream::new(ctx)?;
        let mut graphs = Vec::with_capacity(num_slots);
        let built = (0..num_slots).try_for_each(|slot| -> Result<()> {
            let base = slot * layout.slot_stride();
            let bodies: Vec<Vec<HostCopy>> = classes
                .iter()
                .map(|ranges| {
                    ranges
                        .iter()
                        .map(|&(off, bytes)| HostCopy {
                            // SAFETY: inside the host buffer (total_bytes covers every slot).
                            dst: unsafe { host.host_ptr().add(base + off) },
                            src: staging.ptr() + (base + off) as u64,
                            bytes,
                        })
                        .collect()
                })
                .collect();
            let at = SlotAt::Host { seq: 0, slot };
            let mut p = pack_params(layout, target, &[], placeholder, at);
            let param = (&mut p as *mut abi::srb_pack_params).cast::<c_void>();
            // SAFETY: the context is bound by the caller (Slots::new) and is the kernel's;
            // srb_pack_switch takes srb_pack_params then the handle; the copies lie inside the
            // staging buffer and the host buffer (allocated device-mapped for this), which the
            // Slots that own this outlive it with; `upload` is a stream of the context.
            let graph = unsafe {
                SwitchGraph::new(ctx.cu_ctx(), &kernel, shape, param, &bodies, upload.raw())?
            };
            graphs.push(graph);
            Ok(())
        });
        // Built or not, the uploads enqueued so far end here: where a graph failed, the ones
        // before it are destroyed when `graphs` drops on return, and none may be mid-upload.
        built.and(upload.synchronize())?;
        Ok(SizedCopy { graphs })
    }

    /// Slot `slot`'s graph: [`SwitchGraph::launch`] with an `srb_pack_params` packs into the
    /// slot and copies the rows it packed. (The enqueue calls it directly: one frame less on
    /// the path every sized enqueue takes.)
    pub(crate) fn graph(&self, slot: usize) -> &SwitchGraph {
        &self.graphs[slot]
    }
}

/// `e`, from [`SizedCopy::new`], as the error a readback that cannot have the sized copy
/// gets: a driver that refuses what the sized copy needs (its kernel image, a conditional node,
/// the graph) makes it unavailable, with the driver's error in the reason. Any other error
/// passes unchanged, a driver error too: out of memory or a lost context is not a missing
/// feature, and the whole-slot copy that `Auto` would fall back to would hide it.
pub(crate) fn unavailable(e: Error) -> Error {
    use cudarc::driver::sys::CUresult as R;
    match e {
        Error::Cuda { ref source, .. }
            if matches!(
                source.0,
                R::CUDA_ERROR_NOT_SUPPORTED
                    | R::CUDA_ERROR_INVALID_VALUE
                    | R::CUDA_ERROR_INVALID_PTX
                    | R::CUDA_ERROR_INVALID_IMAGE
                    | R::CUDA_ERROR_NO_BINARY_FOR_GPU
                    | R::CUDA_ERROR_UNSUPPORTED_PTX_VERSION
                    | R::CUDA_ERROR_JIT_COMPILER_NOT_FOUND
                    | R::CUDA_ERROR_NOT_FOUND
            ) =>
        {
            Error::SizedCopyUnavailable {
                reason: format!("the driver could not build it ({e})"),
            }
        }
        e => e,
    }
}

/// Whether a driver of version `version` (`cuDriverGetVersion`) can run the sized copy: CUDA
/// 12.8 or newer.
pub(crate) fn driver_supports(version: i32) -> bool {
    version >= switch_graph::SIZED_COPY_DRIVER
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::BucketTable;

    #[test]
    fn a_driver_failure_makes_the_sized_copy_unavailable() {
        use cudarc::driver::{sys::CUresult, DriverError};
        let e = unavailable(Error::Cuda {
            call: "cuGraphInstantiateWithFlags",
            source: DriverError(CUresult::CUDA_ERROR_NOT_SUPPORTED),
        });
        let Error::SizedCopyUnavailable { reason } = &e else {
            panic!("{e:?}")
        };
        // The driver's name for the error where libcuda loads, its number elsewhere.
        assert!(
            reason
                .starts_with("the driver could not build it (cuGraphInstantiateWithFlags failed: ")
                && (reason.contains("CUDA_ERROR_NOT_SUPPORTED") || reason.contains("801")),
            "{reason}"
        );
        let other = unavailable(Error::config("too many size classes"));
        assert!(matches!(other, Error::InvalidConfig { .. }), "{other:?}");
        // Out of memory, or a lost context, is not a missing feature: it passes as it is.
        for code in [
            CUresult::CUDA_ERROR_OUT_OF_MEMORY,
            CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
        ] {
            let e = unavailable(Error::Cuda {
                call: "cuGraphUpload",
                source: DriverError(code),
            });
            assert!(matches!(e, Error::Cuda { .. }), "{code:?}: {e:?}");
        }
    }

    #[test]
    fn classes_reach_the_capacity() {
        assert_eq!(size_classes(1), 1);
        assert_eq!(size_classes(2), 2);
        assert_eq!(size_classes(3), 3);
        assert_eq!(size_classes(4), 3);
        assert_eq!(size_classes(5), 4);
        assert_eq!(size_classes(1 << 20), 21);
        assert_eq!(size_classes((1 << 20) + 1), 22);
    }

    #[test]
    fn one_column_copies_its_rows_and_the_trailer() {
        // 100 rows of 8 bytes: column at 0, trailer at 800.
        let l = SlotLayout::new(100, &[8]).unwrap();
        assert_eq!(l.trailer_offset(), 800);
        assert_eq!(class_ranges(&l, 0), vec![(0, 8), (800, 32)]);
        assert_eq!(class_ranges(&l, 3), vec![(0, 64), (800, 32)]);
        // 64 rows end at 512, far from the trailer.
        assert_eq!(class_ranges(&l, 6), vec![(0, 512), (800, 32)]);
        // The top class (128 >= 100 rows): the whole slot in one copy.
        assert_eq!(class_ranges(&l, 7), vec![(0, 832)]);
        assert_eq!(size_classes(l.capacity()), 8);
    }

    #[test]
    fn columns_of_mixed_sizes_and_a_table() {
        let l = SlotLayout::new(3, &[8, 4, 12, 1]).unwrap();
        // offsets 0, 32, 48, 96; trailer 112.
        // 1 row: column 1 ends at 36, 12 bytes before column 2: merged; column 3 ends at 97,
        // 15 bytes before the trailer: merged.
        assert_eq!(class_ranges(&l, 0), vec![(0, 8), (32, 28), (96, 48)]);
        // 2 rows: column 0 ends at 16, a whole alignment (16) before column 1: apart.
        assert_eq!(class_ranges(&l, 1), vec![(0, 16), (32, 40), (96, 48)]);
        // Top class: every region meets the next within the padding.
        assert_eq!(class_ranges(&l, 2), vec![(0, 144)]);
        let t = SlotLayout::with_buckets(3, &[8], 1, BucketTable::Always).unwrap();
        assert_eq!(class_ranges(&t, 0), vec![(0, 8), (32, t.slot_bytes() - 32)]);
    }
}
