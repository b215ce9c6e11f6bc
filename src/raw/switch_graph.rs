//! The staged transport's sized copy at the driver level: one CUDA graph of a kernel node (the
//! pack, which sets a conditional handle) and a SWITCH node whose body `k` holds the copies of
//! size class `k`, instantiated once and launched per readback.
//!
//! The crate is built against cudarc's CUDA 12.0 bindings (so that it loads on R525 drivers),
//! which lack graph conditionals: the two entry points that need them are fetched at run time
//! through `cuGetProcAddress_v2`, and their structs are declared here in `cuda.h` 12.8's field
//! order, with size tests. Only drivers of CUDA 12.8 or newer get here ([`SIZED_COPY_DRIVER`]).
use super::driver::check;
use super::module::Kernel;
use crate::error::{Error, Result};
use crate::launch::LaunchShape;
use cudarc::driver::sys::{
    self, CUcontext, CUdeviceptr, CUgraph, CUgraphExec, CUgraphNode, CUresult, CUstream,
};
use std::ffi::{c_void, CStr};

/// The oldest driver (`cuDriverGetVersion`) whose kernels set SWITCH conditionals: CUDA 12.8.
pub(crate) const SIZED_COPY_DRIVER: i32 = 12080;

/// `CUgraphConditionalHandle` (`cuda.h`: `typedef cuuint64_t CUgraphConditionalHandle`).
pub(crate) type ConditionalHandle = u64;

/// `CU_GRAPH_NODE_TYPE_CONDITIONAL` (`CUgraphNodeType`).
const NODE_TYPE_CONDITIONAL: i32 = 13;
/// `CU_GRAPH_COND_TYPE_SWITCH` (`CUgraphConditionalNodeType`).
const COND_TYPE_SWITCH: u32 = 2;
/// `CU_GRAPH_COND_ASSIGN_DEFAULT`: the handle takes its default value at every launch.
const COND_ASSIGN_DEFAULT: u32 = 1;

/// `CUDA_CONDITIONAL_NODE_PARAMS` (`cuda.h` 12.8): handle, type, size, phGraph_out, ctx.
#[repr(C)]
#[derive(Clone, Copy)]
struct ConditionalParams {
    handle: ConditionalHandle,
    kind: u32,
    size: u32,
    graphs_out: *mut CUgraph,
    ctx: CUcontext,
}

/// `CUgraphNodeParams` (`cuda.h` 12.8): the type, three reserved ints, a union of 29 64-bit
/// words (only its conditional member is used here), one reserved 64-bit word: 256 bytes.
#[repr(C)]
struct NodeParams {
    kind: i32,
    reserved0: [i32; 3],
    conditional: ConditionalParams,
    rest_of_union: [i64; 29 - 4],
    reserved2: i64,
}

/// `cuGraphConditionalHandleCreate` (CUDA 12.3).
type HandleCreateFn = unsafe extern "C" fn(
    *mut ConditionalHandle,
    CUgraph,
    CUcontext,
    std::ffi::c_uint,
    std::ffi::c_uint,
) -> CUresult;
/// `cuGraphAddNode` as of CUDA 12.2 (without edge data).
type AddNodeFn = unsafe extern "C" fn(
    *mut CUgraphNode,
    CUgraph,
    *const CUgraphNode,
    usize,
    *mut NodeParams,
) -> CUresult;

/// The driver's version, `cuDriverGetVersion` (e.g. 12080 for CUDA 12.8). The driver must be
/// loaded (`driver::ensure_driver`).
pub(crate) fn driver_version() -> Result<i32> {
    let mut v = 0;
    // SAFETY: v is a valid out-pointer; the call needs no context.
    let status = unsafe { sys::cuDriverGetVersion(&mut v) };
    check(status, "cuDriverGetVersion")?;
    Ok(v)
}

/// The driver's entry point `name` as of CUDA version `version`.
///
/// # Safety
/// `F` is the function pointer type of that entry point at that version.
pub(super) unsafe fn entry_point<F: Copy>(name: &'static CStr, version: i32) -> Result<F> {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    let mut pfn: *mut c_void = std::ptr::null_mut();
    let mut found = sys::CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SUCCESS;
    // SAFETY: name is NUL-terminated; pfn and found are valid out-pointers.
    let status = unsafe {
        sys::cuGetProcAddress_v2(
            name.as_ptr(),
            &mut pfn,
            version,
            sys::CUdriverProcAddress_flags::CU_GET_PROC_ADDRESS_DEFAULT as u64,
            &mut found,
        )
    };
    check(status, "cuGetProcAddress_v2")?;
    if pfn.is_null() || found != sys::CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SUCCESS {
        return Err(Error::SizedCopyUnavailable {
            reason: format!("the driver has no {}", name.to_string_lossy()),
        });
    }
    // SAFETY: a non-null entry point, of type F per the contract (sizes asserted equal).
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&pfn) })
}

/// One device-to-host copy of a switch body: `bytes` from device address `src` to `dst`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostCopy {
    pub(crate) dst: *mut u8,
    pub(crate) src: CUdeviceptr,
    pub(crate) bytes: usize,
}

/// An instantiated graph `[kernel] -> SWITCH(bodies)`, uploaded, whose kernel node's
/// parameters change per launch.
#[derive(Debug)]
pub(crate) struct SwitchGraph {
    graph: CUgraph,
    exec: CUgraphExec,
    kernel_node: CUgraphNode,
    kernel: Kernel,
    shape: LaunchShape,
    handle: ConditionalHandle,
}

// SAFETY: graph, exec and node handles may be used from any thread with their context current;
// every use binds it first, and the owner (one slot's lease holder) uses them one at a time.
unsafe impl Send for SwitchGraph {}
// SAFETY: as above; `&self` methods that launch are called by the slot's lease holder only.
unsafe impl Sync for SwitchGraph {}

/// A graph this crate created and destroys: while building (a failure half-way destroys what
/// was built), and the sized launch's captured bodies.
#[derive(Debug)]
pub(crate) struct GraphGuard(pub(crate) CUgraph);

// SAFETY: a graph handle may be used from any thread with its context current; its owner uses
// it from one thread at a time (building, or cloning it into another graph under a lock).
unsafe impl Send for GraphGuard {}
// SAFETY: as above; shared references only read the handle.
unsafe impl Sync for GraphGuard {}
impl Drop for GraphGuard {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: a graph this module created and nothing else refers to.
            let _ = unsafe { sys::cuGraphDestroy(self.0) };
        }
    }
}

impl SwitchGraph {
    /// Builds `[kernel] -> SWITCH(bodies)`: `kernel` (with its first parameter at `param`,
    /// then the conditional handle, its second and last) sets the handle, whose default is the last
    /// body; body `k` runs the copies `bodies[k]`, side by side. Instantiates it, and enqueues
    /// its upload on `upload` (the caller synchronizes that stream).
    ///
    /// # Safety
    /// - `ctx` is current on this thread and is `kernel`'s context;
    /// - the kernel takes two parameters: the value `param` points to (of its C type), then a
    ///   `CUgraphConditionalHandle`;
    /// - every copy's ranges stay valid (device memory of `ctx`, pinned host memory mapped
    ///   into the device, as conditional bodies require) for as long as the graph lives and is
    ///   launched;
    /// - `upload` is a live stream of `ctx`.
    pub(crate) unsafe fn new(
        ctx: CUcontext,
        kernel: &Kernel,
        shape: LaunchShape,
        param: *mut c_void,
        bodies: &[Vec<HostCopy>],
        upload: CUstream,
    ) -> Result<Self> {
        let k = u32::try_from(bodies.len()).map_err(|_| Error::config("too many size classes"))?;
        assert!(k >= 1, "a switch needs at least one body");
        let fill = |i: usize, body_graph: CUgraph| -> Result<()> {
            for c in &bodies[i] {
                let copy = memcpy_params(c);
                let mut node: CUgraphNode = std::ptr::null_mut();
                // SAFETY: a live body graph; the copy's ranges per the contract.
                let status = unsafe {
                    sys::cuGraphAddMemcpyNode(
                        &mut node,
                        body_graph,
                        std::ptr::null(),
                        0,
                        &copy,
                        ctx,
                    )
                };
                check(status, "cuGraphAddMemcpyNode")?;
            }
            Ok(())
        };
        // SAFETY: per this function's contract.
        unsafe { Self::build(ctx, kernel, shape, param, k, k - 1, fill, upload) }
    }

    /// Builds `[kernel] -> SWITCH(k bodies)`, the handle's default `default` at every launch
    /// (`k` or more: no body unless the kernel sets one), body `i` filled by `fill(i, graph)`;
    /// instantiates it and enqueues its upload on `upload`. Where `fill` fails, nothing is
    /// left: the graph is destroyed and its error returned.
    ///
    /// # Safety
    /// As for [`Self::new`], with `fill` adding to each body only nodes whose resources stay
    /// valid for as long as the graph lives and is launched.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn build(
        ctx: CUcontext,
        kernel: &Kernel,
        shape: LaunchShape,
        param: *mut c_void,
        k: u32,
        default: u32,
        fill: impl FnMut(usize, CUgraph) -> Result<()>,
        upload: CUstream,
    ) -> Result<Self> {
        let mut guard = GraphGuard(std::ptr::null_mut());
        // SAFETY: an out-pointer; no flags.
        let status = unsafe { sys::cuGraphCreate(&mut guard.0, 0) };
        check(status, "cuGraphCreate")?;
        let graph = guard.0;
        // SAFETY: per this function's contract; a new graph, no dependencies.
        let added = unsafe { add_switch(ctx, graph, &[], kernel, shape, param, k, default, fill)? };
        let (kernel_node, handle) = (added.kernel_node, added.handle);
        let mut exec: CUgraphExec = std::ptr::null_mut();
        // SAFETY: a complete graph; an out-pointer.
        let status = unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0) };
        check(status, "cuGraphInstantiateWithFlags")?;
        let this = SwitchGraph {
            graph: std::mem::replace(&mut guard.0, std::ptr::null_mut()),
            exec,
            kernel_node,
            kernel: kernel.clone(),
            shape,
            handle,
        };
        // Uploaded now, so that the first readback's launch does not pay for it.
        // SAFETY: a live executable graph; a live stream of its context, per the contract.
        let status = unsafe { sys::cuGraphUpload(this.exec, upload) };
        check(status, "cuGraphUpload")?;
        Ok(this)
    }

    /// Sets the kernel node's parameters (all but the handle, which stays) and launches the
    /// graph on `stream`.
    ///
    /// # Safety
    /// - the graph's context is current on this thread; `stream` is a live stream of it;
    /// - `param` as for [`Self::new`], and everything it addresses stays valid until the
    ///   launch has run;
    /// - no other thread sets parameters or launches this graph at the same time.
    pub(crate) unsafe fn launch(&self, stream: CUstream, param: *mut c_void) -> Result<()> {
        let mut handle = self.handle;
        let mut args = [param, (&mut handle as *mut ConditionalHandle).cast()];
        let kp = kernel_params(&self.kernel, self.shape, &mut args);
        // SAFETY: a node of this executable graph, the same kernel; the driver copies the
        // parameters, which affect later launches only.
        let status =
            unsafe { sys::cuGraphExecKernelNodeSetParams_v2(self.exec, self.kernel_node, &kp) };
        check(status, "cuGraphExecKernelNodeSetParams")?;
        // SAFETY: a live executable graph and stream of the current context.
        let status = unsafe { sys::cuGraphLaunch(self.exec, stream) };
        check(status, "cuGraphLaunch")
    }
}

/// What [`add_switch`] added: the setter's kernel node, the SWITCH node, the handle.
pub(crate) struct AddedSwitch {
    pub(crate) kernel_node: CUgraphNode,
    pub(crate) switch_node: CUgraphNode,
    pub(crate) handle: ConditionalHandle,
}

/// Adds `[kernel] -> SWITCH(k bodies)` to `graph` after `deps`: a conditional handle of
/// `graph` whose default at every launch is `default`, the kernel node (its first parameter at
/// `param`, then the handle), and the SWITCH node, whose body `i` `fill(i, body)` fills.
///
/// # Safety
/// - `ctx` is current on this thread and is `kernel`'s context; `graph` is a live graph of it
///   (one being captured too) and `deps` live nodes of `graph`;
/// - the kernel takes the value `param` points to (of its C type), then a
///   `CUgraphConditionalHandle`;
/// - `fill` adds to each body only nodes whose resources stay valid while `graph` lives.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn add_switch(
    ctx: CUcontext,
    graph: CUgraph,
    deps: &[CUgraphNode],
    kernel: &Kernel,
    shape: LaunchShape,
    param: *mut c_void,
    k: u32,
    default: u32,
    mut fill: impl FnMut(usize, CUgraph) -> Result<()>,
) -> Result<AddedSwitch> {
    assert!(k >= 1, "a switch needs at least one body");
    // SAFETY: the types are those of CUDA 12.3's and 12.2's entry points.
    let (handle_create, add_node) = unsafe {
        (
            entry_point::<HandleCreateFn>(c"cuGraphConditionalHandleCreate", 12030)?,
            entry_point::<AddNodeFn>(c"cuGraphAddNode", 12020)?,
        )
    };
    let mut handle: ConditionalHandle = 0;
    // SAFETY: a live graph of the current context; an out-pointer.
    let status = unsafe { handle_create(&mut handle, graph, ctx, default, COND_ASSIGN_DEFAULT) };
    check(status, "cuGraphConditionalHandleCreate")?;
    let mut args = [param, (&mut handle as *mut ConditionalHandle).cast()];
    let kp = kernel_params(kernel, shape, &mut args);
    let mut kernel_node: CUgraphNode = std::ptr::null_mut();
    // SAFETY: per the contract for the parameters and dependencies; kp and args live for the
    // call, which copies them.
    let status = unsafe {
        sys::cuGraphAddKernelNode_v2(&mut kernel_node, graph, deps.as_ptr(), deps.len(), &kp)
    };
    check(status, "cuGraphAddKernelNode")?;
    let mut np = NodeParams {
        kind: NODE_TYPE_CONDITIONAL,
        reserved0: [0; 3],
        conditional: ConditionalParams {
            handle,
            kind: COND_TYPE_SWITCH,
            size: k,
            graphs_out: std::ptr::null_mut(),
            ctx,
        },
        rest_of_union: [0; 25],
        reserved2: 0,
    };
    let mut switch_node: CUgraphNode = std::ptr::null_mut();
    // SAFETY: a live graph, one live dependency, parameters as cuda.h 12.8 lays them out; the
    // driver fills graphs_out with the k bodies, owned by the node.
    let status = unsafe { add_node(&mut switch_node, graph, &kernel_node, 1, &mut np) };
    check(status, "cuGraphAddNode (SWITCH)")?;
    let graphs_out = np.conditional.graphs_out;
    if graphs_out.is_null() {
        return Err(Error::SizedCopyUnavailable {
            reason: "cuGraphAddNode returned no SWITCH bodies".into(),
        });
    }
    for i in 0..k as usize {
        // SAFETY: the driver wrote k body graphs at graphs_out.
        fill(i, unsafe { *graphs_out.add(i) })?;
    }
    Ok(AddedSwitch {
        kernel_node,
        switch_node,
        handle,
    })
}

/// Adds `child` (cloned by the driver) to `body` as a child graph node.
///
/// # Safety
/// `body` and `child` are live graphs of the current context; `child` holds only nodes a
/// conditional body may hold (no conditional node of its own here).
pub(crate) unsafe fn add_child(body: CUgraph, child: CUgraph) -> Result<()> {
    let mut node: CUgraphNode = std::ptr::null_mut();
    // SAFETY: per the contract; no dependencies.
    let status =
        unsafe { sys::cuGraphAddChildGraphNode(&mut node, body, std::ptr::null(), 0, child) };
    check(status, "cuGraphAddChildGraphNode")
}

/// Adds `[kernel] -> SWITCH(k bodies)` to the graph `stream` is capturing, after its current
/// work, and makes the SWITCH node the capture's dependency: later captured work follows it.
///
/// # Safety
/// As for [`add_switch`], with `stream` a live stream of `ctx` that is capturing.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn capture_switch(
    ctx: CUcontext,
    stream: CUstream,
    kernel: &Kernel,
    shape: LaunchShape,
    param: *mut c_void,
    k: u32,
    default: u32,
    fill: impl FnMut(usize, CUgraph) -> Result<()>,
) -> Result<()> {
    let add = |graph, deps: &[CUgraphNode]| {
        // SAFETY: per the contract; the capture's own graph and dependencies.
        let added =
            unsafe { add_switch(ctx, graph, deps, kernel, shape, param, k, default, fill)? };
        Ok(added.switch_node)
    };
    // SAFETY: per the contract; `add` adds to the capture's graph only.
    unsafe { add_to_capture(stream, add) }
}

/// Adds what `add` adds to the graph `stream` is capturing, after the capture's current
/// dependencies (`add` gets the graph and them, and returns the node later captured work must
/// follow), and makes that node the capture's dependency. An error invalidates the capture.
///
/// # Safety
/// `stream` is a live stream of the current context, capturing; `add` adds only nodes of that
/// graph whose resources stay valid while it lives.
pub(crate) unsafe fn add_to_capture(
    stream: CUstream,
    add: impl FnOnce(CUgraph, &[CUgraphNode]) -> Result<CUgraphNode>,
) -> Result<()> {
    let mut state = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    let mut id = 0u64;
    let mut graph: CUgraph = std::ptr::null_mut();
    let mut deps: *const CUgraphNode = std::ptr::null();
    let mut n = 0usize;
    // SAFETY: a live stream per the contract; out-pointers.
    let status = unsafe {
        sys::cuStreamGetCaptureInfo_v2(stream, &mut state, &mut id, &mut graph, &mut deps, &mut n)
    };
    check(status, "cuStreamGetCaptureInfo")?;
    let deps: &[CUgraphNode] = if n == 0 || deps.is_null() {
        &[]
    } else {
        // SAFETY: the driver's array of n nodes, valid until the next capture call on stream.
        unsafe { std::slice::from_raw_parts(deps, n) }
    };
    let record = || -> Result<()> {
        let mut last = add(graph, deps)?;
        // SAFETY: the stream is capturing; the node is of its graph.
        let status = unsafe {
            sys::cuStreamUpdateCaptureDependencies(
                stream,
                &mut last,
                1,
                sys::CUstreamUpdateCaptureDependencies_flags::CU_STREAM_SET_CAPTURE_DEPENDENCIES
                    as u32,
            )
        };
        check(status, "cuStreamUpdateCaptureDependencies")
    };
    record().inspect_err(|_| {
        // What was added stays in the capture's graph (the driver does not remove nodes from
        // a graph being captured): a setter and a SWITCH missing bodies, or whole but not
        // followed by what the capture records next. Nothing may run them: a query of the
        // capturing stream is an illegal operation in a capture, which invalidates it, so
        // ending it fails and no graph of it is instantiated.
        // SAFETY: a live stream per the contract; its status is the point, not its result.
        let _ = unsafe { sys::cuStreamQuery(stream) };
    })
}

impl Drop for SwitchGraph {
    fn drop(&mut self) {
        // The owner waited for every launch (the slots' events) before dropping it.
        // SAFETY: created once in `new`, destroyed once here.
        unsafe {
            let _ = sys::cuGraphExecDestroy(self.exec);
            let _ = sys::cuGraphDestroy(self.graph);
        }
    }
}

/// The kernel node's parameters: `kernel` in `shape` (without programmatic launch: a graph's
/// kernel node follows the whole previous stream work), with `args`.
pub(super) fn kernel_params(
    kernel: &Kernel,
    shape: LaunchShape,
    args: &mut [*mut c_void],
) -> sys::CUDA_KERNEL_NODE_PARAMS {
    sys::CUDA_KERNEL_NODE_PARAMS {
        func: kernel.raw(),
        gridDimX: shape.grid.max(1),
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: shape.block.max(1),
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: 0,
        kernelParams: args.as_mut_ptr(),
        extra: std::ptr::null_mut(),
        kern: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
    }
}

/// A 1-D device-to-host copy as 3-D parameters (what `cudaGraphAddMemcpyNode1D` builds). Every
/// field is written out: the memory types are enums without a zero value, so the struct cannot
/// start out zeroed.
fn memcpy_params(c: &HostCopy) -> sys::CUDA_MEMCPY3D {
    sys::CUDA_MEMCPY3D {
        srcXInBytes: 0,
        srcY: 0,
        srcZ: 0,
        srcLOD: 0,
        srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        srcHost: std::ptr::null(),
        srcDevice: c.src,
        srcArray: std::ptr::null_mut(),
        reserved0: std::ptr::null_mut(),
        srcPitch: c.bytes,
        srcHeight: 1,
        dstXInBytes: 0,
        dstY: 0,
        dstZ: 0,
        dstLOD: 0,
        dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_HOST,
        dstHost: c.dst.cast(),
        dstDevice: 0,
        dstArray: std::ptr::null_mut(),
        reserved1: std::ptr::null_mut(),
        dstPitch: c.bytes,
        dstHeight: 1,
        WidthInBytes: c.bytes,
        Height: 1,
        Depth: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memcpy_params_describe_one_row_of_bytes() {
        let mut host = [0u8; 64];
        let c = HostCopy {
            dst: host.as_mut_ptr(),
            src: 0x7000_0000,
            bytes: 48,
        };
        let p = memcpy_params(&c);
        assert_eq!(p.srcMemoryType, sys::CUmemorytype::CU_MEMORYTYPE_DEVICE);
        assert_eq!(p.dstMemoryType, sys::CUmemorytype::CU_MEMORYTYPE_HOST);
        assert_eq!(
            (p.srcDevice, p.dstHost),
            (0x7000_0000, host.as_mut_ptr().cast())
        );
        assert_eq!((p.WidthInBytes, p.Height, p.Depth), (48, 1, 1));
        assert_eq!((p.srcPitch, p.dstPitch), (48, 48));
    }

    #[test]
    #[ignore = "needs a GPU with a CUDA 12.8 driver"]
    fn a_failed_fill_invalidates_the_capture() {
        let ctx = crate::device::open(0).expect("a GPU");
        let kernel = super::super::module::Module::switch(&ctx)
            .and_then(|m| m.function(c"srb_size_switch"))
            .expect("the switch image");
        let stream = ctx.new_stream().unwrap();
        let buf = crate::raw::buffer::DeviceBuffer::new_zeroed(&ctx, 64).unwrap();
        // A memset node, on the raw driver: cudarc's own memset would wait on and record its
        // events, which a capture does not take.
        let memset = |s| {
            // SAFETY: 64 bytes of the buffer, on a live stream of its context.
            check(
                unsafe { sys::cuMemsetD8Async(buf.ptr(), 0, 64, s) },
                "memset",
            )
            .unwrap()
        };
        let s = stream.cu_stream();
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        // SAFETY: a live stream of the current context, not capturing; ended below.
        check(unsafe { sys::cuStreamBeginCapture_v2(s, mode) }, "begin").unwrap();
        memset(s);
        let shape = LaunchShape {
            grid: 1,
            block: 32,
            programmatic: false,
        };
        // The setter's parameter is never launched here: any 288 bytes do.
        let mut param = [0u8; 288];
        let mut filled = Vec::new();
        // SAFETY: the context is current (device::open bound it) and is the kernel's; the
        // stream is capturing; fill adds nothing.
        let refused = unsafe {
            capture_switch(
                ctx.cu_ctx(),
                s,
                &kernel,
                shape,
                param.as_mut_ptr().cast(),
                3,
                3,
                |i, _| {
                    filled.push(i);
                    match i {
                        1 => Err(Error::config("body 1 refused")),
                        _ => Ok(()),
                    }
                },
            )
        };
        assert!(
            matches!(refused, Err(Error::InvalidConfig { .. })),
            "{refused:?}"
        );
        assert_eq!(filled, [0, 1]);
        // The capture is invalidated: ending it fails, so no graph holding part of a sized
        // launch is instantiated.
        let mut graph: CUgraph = std::ptr::null_mut();
        // SAFETY: the capture begun above on this thread.
        let ended = unsafe { sys::cuStreamEndCapture(s, &mut graph) };
        assert_eq!(
            ended,
            sys::CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
            "ending the capture"
        );
        assert!(graph.is_null());
        // The stream is usable again, outside any capture.
        memset(s);
        stream.synchronize().unwrap();
    }

    #[test]
    fn structs_have_cuda_h_sizes() {
        // cuda.h 12.8: CUDA_CONDITIONAL_NODE_PARAMS is 32 bytes, CUgraphNodeParams 256, with
        // the union at byte 16.
        assert_eq!(std::mem::size_of::<ConditionalParams>(), 32);
        assert_eq!(std::mem::size_of::<NodeParams>(), 256);
        assert_eq!(std::mem::offset_of!(NodeParams, conditional), 16);
        assert_eq!(std::mem::offset_of!(NodeParams, reserved2), 248);
        assert_eq!(std::mem::offset_of!(ConditionalParams, graphs_out), 16);
        assert_eq!(std::mem::offset_of!(ConditionalParams, ctx), 24);
    }
}
