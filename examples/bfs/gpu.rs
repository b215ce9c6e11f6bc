//! The device side of the BFS: its arrays and kernels (`csrc/testing/bfs.cu`), the launches
//! of each way, and a stream capture of every level for the graph ways.
use crate::graph::Csr;
use anyhow::Result;
use cudarc::driver::sys;
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};
use sized_readback::testing::{upload, CapturedGraph, DeviceBuffer, Kernel, PinnedBuffer};
use sized_readback::LaunchShape;
use std::ffi::c_void;
use std::sync::Arc;

pub(crate) const BLOCK: u32 = 256;
pub(crate) const TILE: u64 = 2048;
pub(crate) const ONE_VERTEX: u64 = 1 << 32;
pub(crate) const MAX_GRID: u64 = 16384;

/// `srbt_bfs` of csrc/testing/bfs.cu: off, adj, level, base[2], shift[2], count[2], depth.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Dev(pub(crate) [u64; 10]);

pub(crate) struct Gpu {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) expand: Kernel,
    pub(crate) prepare: Kernel,
    pub(crate) dev: Dev,
    pub(crate) _buffers: Vec<DeviceBuffer>,
    pub(crate) host_count: PinnedBuffer,
    /// levels + 1 device timestamps (ns), one per prepare: each level's start, then the end.
    pub(crate) stamps: DeviceBuffer,
    /// Its length in bytes.
    pub(crate) stamps_len: usize,
}

impl Gpu {
    pub(crate) fn count(&self, p: usize) -> u64 {
        self.dev.0[7 + p]
    }
    pub(crate) fn launch_expand(
        &self,
        stream: sys::CUstream,
        p: i32,
        grid: u64,
    ) -> sized_readback::Result<()> {
        let mut d = self.dev;
        let mut p = p;
        let mut args: [*mut c_void; 2] = [(&mut d as *mut Dev).cast(), (&mut p as *mut i32).cast()];
        let shape = LaunchShape {
            grid: grid.clamp(1, MAX_GRID * 4) as u32,
            block: BLOCK,
            programmatic: false,
        };
        // SAFETY: srbt_bfs_expand(srbt_bfs, int); every array of Dev is allocated for the
        // graph; a live stream of the context.
        unsafe { self.expand.launch(stream, shape, &mut args) }
    }
    /// Level `l`'s prepare (or, with `l` = levels, the end's stamp).
    pub(crate) fn prepare(&self, next: usize, l: i32) -> Result<()> {
        let (mut c, mut d, mut l) = (self.count(next), self.dev.0[9], l);
        let mut t = self.stamps.ptr();
        let mut args: [*mut c_void; 4] = [
            (&mut c as *mut u64).cast(),
            (&mut d as *mut u64).cast(),
            (&mut l as *mut i32).cast(),
            (&mut t as *mut u64).cast(),
        ];
        let shape = LaunchShape {
            grid: 1,
            block: 32,
            programmatic: false,
        };
        // SAFETY: srbt_bfs_prepare(uint64_t*, int32_t*, int, uint64_t*); l <= levels, and
        // stamps holds levels + 1.
        unsafe {
            self.prepare
                .launch(self.stream.cu_stream(), shape, &mut args)?
        };
        Ok(())
    }
    /// Level -1 everywhere, the root at 0, frontier 0 = {root}.
    pub(crate) fn reset(&self, g: &Csr, root: usize) -> Result<()> {
        let s = self.stream.cu_stream();
        // SAFETY: n i32 levels at dev.0[2]; the stream is live; then synchronized.
        unsafe { sys::cuMemsetD32Async(self.dev.0[2], u32::MAX, g.n, s).result()? };
        // SAFETY: the stamps' bytes, on the same stream: a way that missed a stamp shows 0,
        // never the previous run's.
        unsafe { sys::cuMemsetD8Async(self.stamps.ptr(), 0, self.stamps_len, s).result()? };
        self.stream.synchronize()?;
        let deg = (g.off[root + 1] - g.off[root]) as u64;
        // SAFETY: into the arrays allocated for them (one value each), after the memset above.
        unsafe {
            upload(
                &self.ctx,
                self.dev.0[2] + 4 * root as u64,
                &0i32.to_le_bytes(),
            )?;
            upload(&self.ctx, self.count(0), &(ONE_VERTEX + deg).to_le_bytes())?;
            upload(&self.ctx, self.dev.0[3], &0i64.to_le_bytes())?;
            upload(&self.ctx, self.dev.0[5], &g.off[root].to_le_bytes())?;
        }
        Ok(())
    }
    pub(crate) fn read_edges(&self, p: usize) -> Result<u64> {
        // SAFETY: 8 bytes from the count word into pinned memory; synchronized next.
        unsafe {
            sys::cuMemcpyDtoHAsync_v2(
                self.host_count.host_ptr().cast(),
                self.count(p),
                8,
                self.stream.cu_stream(),
            )
            .result()?;
        }
        self.stream.synchronize()?;
        // SAFETY: the copy completed.
        Ok(unsafe { *(self.host_count.host_ptr() as *const u64) } & 0xffff_ffff)
    }
}

/// Captures `levels` levels on `gpu.stream`, each: an event-record node of `marks[l]` (if any),
/// the prepare, then `expand(p)`; after the last, the end's stamp and `marks[levels]`.
///
/// # Safety
/// What `expand` records (a sized launch) outlives every launch of the graph; so do `gpu`'s
/// buffers (drop the graph first).
pub(crate) unsafe fn capture_levels(
    gpu: &Gpu,
    levels: usize,
    marks: Option<&[CudaEvent]>,
    mut expand: impl FnMut(usize) -> sized_readback::Result<()>,
) -> Result<CapturedGraph> {
    let s = gpu.stream.cu_stream();
    let external = sys::CUevent_record_flags::CU_EVENT_RECORD_EXTERNAL as u32;
    let record = || -> Result<()> {
        let mut p = 0usize;
        for l in 0..levels {
            if let Some(marks) = marks {
                // SAFETY: a live event and the capturing stream: an event-record node.
                unsafe { sys::cuEventRecordWithFlags(marks[l].cu_event(), s, external).result()? };
            }
            gpu.prepare(1 - p, l as i32)?;
            expand(p)?;
            p = 1 - p;
        }
        gpu.prepare(1 - p, levels as i32)?;
        if let Some(marks) = marks {
            // SAFETY: as above.
            unsafe { sys::cuEventRecordWithFlags(marks[levels].cu_event(), s, external).result()? };
        }
        Ok(())
    };
    // SAFETY: the BFS's stream, of the bound context; per the contract for what is recorded.
    unsafe { CapturedGraph::capture(&gpu.stream, record) }
}
