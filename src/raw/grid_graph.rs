//! The sized launch's exact-grid form at the driver level: a grid setter kernel node, then the
//! body's one kernel node made device-updatable (CUDA 12.4), whose grid the setter sets from
//! the count on the device in the same launch; built into a graph of its own (instantiated and
//! uploaded once, launched per enqueue) or added to a graph being captured.
//!
//! cudarc's CUDA 12.0 bindings lack the device-updatable attribute (its value is past their
//! enum): the attribute calls are fetched through `cuGetProcAddress_v2` with the attribute's
//! value declared here in `cuda.h` 12.4's layout, with a size test.
use super::driver::check;
use super::module::Kernel;
use super::switch_graph::{add_to_capture, entry_point, kernel_params, GraphGuard};
use crate::error::{Error, Result};
use crate::launch::LaunchShape;
use cudarc::driver::sys::{self, CUgraph, CUgraphExec, CUgraphNode, CUresult, CUstream};
use std::ffi::c_void;

/// `CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE` (`CUlaunchAttributeID`, CUDA 12.4).
const ATTRIBUTE_DEVICE_UPDATABLE: u32 = 13;
/// `CU_GRAPH_NODE_TYPE_KERNEL` (`CUgraphNodeType`).
const NODE_TYPE_KERNEL: i32 = 0;

/// `CUgraphDeviceNode`: the handle device code updates a node through.
pub(crate) type DeviceNode = *mut c_void;

/// `CUlaunchAttributeValue` (`cuda.h` 12.4), a 64-byte union, as its `deviceUpdatableKernelNode`
/// member: `int deviceUpdatable; CUgraphDeviceNode devNode;`.
#[repr(C)]
struct AttributeValue {
    device_updatable: i32,
    dev_node: DeviceNode,
    rest_of_union: [u64; 6],
}

/// `cuGraphKernelNodeSetAttribute` / `cuGraphKernelNodeGetAttribute`, with the attribute id as
/// the `u32` it is.
type SetAttributeFn = unsafe extern "C" fn(CUgraphNode, u32, *const AttributeValue) -> CUresult;
type GetAttributeFn = unsafe extern "C" fn(CUgraphNode, u32, *mut AttributeValue) -> CUresult;

/// The body's one kernel node, as captured: its parameters (the arguments in the driver's copy,
/// valid while the captured graph lives) and the node, whose attributes are copied too.
pub(crate) struct BodyKernel {
    node: CUgraphNode,
    params: sys::CUDA_KERNEL_NODE_PARAMS,
}

impl std::fmt::Debug for BodyKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BodyKernel")
            .field("recorded_grid", &self.recorded_grid())
            .finish()
    }
}

// SAFETY: the node and the argument pointers refer into the captured graph, which its owner
// keeps alive and only reads (adding a node from them copies them) under its lock.
unsafe impl Send for BodyKernel {}
// SAFETY: as above.
unsafe impl Sync for BodyKernel {}

impl BodyKernel {
    /// The one kernel node of `captured`, or why it is not one kernel launch (the exact-grid
    /// form sets the grid of exactly one kernel).
    ///
    /// # Safety
    /// `captured` is a live graph of the current context, kept alive as long as the result is
    /// used (its parameters point into it).
    pub(crate) unsafe fn of(captured: CUgraph) -> std::result::Result<Self, String> {
        let mut n = 0usize;
        // SAFETY: a live graph; a null array asks for the count only.
        let status = unsafe { sys::cuGraphGetNodes(captured, std::ptr::null_mut(), &mut n) };
        check(status, "cuGraphGetNodes").map_err(|e| e.to_string())?;
        if n != 1 {
            return Err(format!(
                "the exact-grid form takes a body of one kernel launch; it recorded {n} operations"
            ));
        }
        let mut node: CUgraphNode = std::ptr::null_mut();
        // SAFETY: room for the one node.
        let status = unsafe { sys::cuGraphGetNodes(captured, &mut node, &mut n) };
        check(status, "cuGraphGetNodes").map_err(|e| e.to_string())?;
        let mut kind: i32 = -1;
        // SAFETY: a live node; the driver writes the type as a C enum (an int), read as one so
        // that a type newer than the bindings' enum is no invalid Rust value.
        let status = unsafe {
            sys::cuGraphNodeGetType(node, (&mut kind as *mut i32).cast::<sys::CUgraphNodeType>())
        };
        check(status, "cuGraphNodeGetType").map_err(|e| e.to_string())?;
        if kind != NODE_TYPE_KERNEL {
            return Err(format!(
                "the exact-grid form takes a body of one kernel launch; it recorded a node of type {kind}"
            ));
        }
        // SAFETY: zeroes are a valid value of this plain C struct (null pointers, zero sizes).
        let mut params: sys::CUDA_KERNEL_NODE_PARAMS = unsafe { std::mem::zeroed() };
        // SAFETY: a kernel node; an out-pointer.
        let status = unsafe { sys::cuGraphKernelNodeGetParams_v2(node, &mut params) };
        check(status, "cuGraphKernelNodeGetParams").map_err(|e| e.to_string())?;
        Ok(BodyKernel { node, params })
    }

    /// The grid the body was recorded with (`gridDim.x`, `y`, `z`).
    pub(crate) fn recorded_grid(&self) -> (u32, u32, u32) {
        (
            self.params.gridDimX,
            self.params.gridDimY,
            self.params.gridDimZ,
        )
    }
}

/// What [`add_grid`] added: the setter's node, the body's, and the body's device handle.
pub(crate) struct AddedGrid {
    pub(crate) setter_node: CUgraphNode,
    pub(crate) body_node: CUgraphNode,
    pub(crate) dev_node: DeviceNode,
}

/// Adds `[setter] -> [body, device-updatable]` to `graph` after `deps`: the body's kernel node
/// added anew from `body` (its attributes copied), opted in to device updates, then the setter
/// node, whose parameters are the value `param` points to, the body's device handle and
/// `items_per_block`, then the edge.
///
/// # Safety
/// - `graph` is a live graph of the current context, `setter`'s (one being captured too), and
///   `deps` live nodes of it;
/// - the setter takes the value `param` points to (of its C type), a `CUgraphDeviceNode`, then
///   a `uint64_t`;
/// - `body`'s captured graph lives, and what its kernel reads and writes stays valid, while
///   `graph` lives and is launched.
pub(crate) unsafe fn add_grid(
    graph: CUgraph,
    deps: &[CUgraphNode],
    setter: &Kernel,
    shape: LaunchShape,
    param: *mut c_void,
    items_per_block: u64,
    body: &BodyKernel,
) -> Result<AddedGrid> {
    // SAFETY: the types are those of the entry points as of CUDA 12.4, whose attribute value
    // is the 64-byte union with the device-updatable member (asked for as of 12.4, so that the
    // driver reads the value as that union).
    let (set_attribute, get_attribute) = unsafe {
        (
            entry_point::<SetAttributeFn>(c"cuGraphKernelNodeSetAttribute", 12040)?,
            entry_point::<GetAttributeFn>(c"cuGraphKernelNodeGetAttribute", 12040)?,
        )
    };
    let mut body_node: CUgraphNode = std::ptr::null_mut();
    // SAFETY: a live graph; the parameters as the driver returned them for the captured node,
    // whose argument copies live as long as its graph (per the contract); no dependencies yet.
    let status = unsafe {
        sys::cuGraphAddKernelNode_v2(&mut body_node, graph, std::ptr::null(), 0, &body.params)
    };
    check(status, "cuGraphAddKernelNode (the body)")?;
    // SAFETY: two live kernel nodes of the same context; the new one is not device-updatable
    // yet (the driver refuses copies to or from one that is).
    let status = unsafe { sys::cuGraphKernelNodeCopyAttributes(body_node, body.node) };
    check(status, "cuGraphKernelNodeCopyAttributes")?;
    let opt_in = AttributeValue {
        device_updatable: 1,
        dev_node: std::ptr::null_mut(),
        rest_of_union: [0; 6],
    };
    // SAFETY: a live kernel node; the value in cuda.h 12.4's layout.
    let status = unsafe { set_attribute(body_node, ATTRIBUTE_DEVICE_UPDATABLE, &opt_in) };
    check(status, "cuGraphKernelNodeSetAttribute (device-updatable)").map_err(unavailable)?;
    let mut got = AttributeValue {
        device_updatable: 0,
        dev_node: std::ptr::null_mut(),
        rest_of_union: [0; 6],
    };
    // SAFETY: as above; an out-pointer.
    let status = unsafe { get_attribute(body_node, ATTRIBUTE_DEVICE_UPDATABLE, &mut got) };
    check(status, "cuGraphKernelNodeGetAttribute (device-updatable)").map_err(unavailable)?;
    if got.device_updatable != 1 || got.dev_node.is_null() {
        return Err(Error::SizedLaunchUnavailable {
            reason: "the driver returned no device handle for the body's kernel node".into(),
        });
    }
    let mut dev_node = got.dev_node;
    let mut per_block = items_per_block;
    let mut args = [
        param,
        (&mut dev_node as *mut DeviceNode).cast(),
        (&mut per_block as *mut u64).cast(),
    ];
    let kp = kernel_params(setter, shape, &mut args);
    let mut setter_node: CUgraphNode = std::ptr::null_mut();
    // SAFETY: per the contract for the parameters and dependencies; kp and args live for the
    // call, which copies them.
    let status = unsafe {
        sys::cuGraphAddKernelNode_v2(&mut setter_node, graph, deps.as_ptr(), deps.len(), &kp)
    };
    check(status, "cuGraphAddKernelNode (the grid setter)")?;
    // SAFETY: two live nodes of graph.
    let status = unsafe { sys::cuGraphAddDependencies(graph, &setter_node, &body_node, 1) };
    check(status, "cuGraphAddDependencies")?;
    Ok(AddedGrid {
        setter_node,
        body_node,
        dev_node,
    })
}

/// Adds `[setter] -> [body]` to the graph `stream` is capturing, after its current work, and
/// makes the body's node the capture's dependency: later captured work follows it. An error
/// invalidates the capture.
///
/// # Safety
/// As for [`add_grid`], with `stream` a live stream of the current context that is capturing;
/// the graph the capture makes must be uploaded before it is launched (the caller's to say).
pub(crate) unsafe fn capture_grid(
    stream: CUstream,
    setter: &Kernel,
    shape: LaunchShape,
    param: *mut c_void,
    items_per_block: u64,
    body: &BodyKernel,
) -> Result<()> {
    let add = |graph, deps: &[CUgraphNode]| {
        // SAFETY: per the contract; the capture's own graph and dependencies.
        let added = unsafe { add_grid(graph, deps, setter, shape, param, items_per_block, body)? };
        Ok(added.body_node)
    };
    // SAFETY: per the contract; `add` adds to the capture's graph only.
    unsafe { add_to_capture(stream, add) }
}

/// A driver that does not know device-updatable nodes (before CUDA 12.4) makes the form
/// unavailable; other errors pass unchanged.
fn unavailable(e: Error) -> Error {
    match e {
        Error::Cuda { .. } => Error::SizedLaunchUnavailable {
            reason: format!("device-updatable kernel nodes (CUDA 12.4) refused: {e}"),
        },
        e => e,
    }
}

/// An instantiated, uploaded `[setter] -> [body]` graph whose setter's parameters change per
/// launch.
#[derive(Debug)]
pub(crate) struct GridGraph {
    graph: CUgraph,
    exec: CUgraphExec,
    setter_node: CUgraphNode,
    setter: Kernel,
    shape: LaunchShape,
    /// The body's device handle and items per block, the setter's last two parameters.
    dev_node: DeviceNode,
    items_per_block: u64,
}

// SAFETY: graph, exec and node handles may be used from any thread with their context current;
// every use binds it first, and the owner launches under a lock.
unsafe impl Send for GridGraph {}
// SAFETY: as above.
unsafe impl Sync for GridGraph {}

impl GridGraph {
    /// Builds `[setter] -> [body]` in a graph of its own, instantiates it and enqueues its
    /// upload on `upload` (a graph whose nodes are updated from the device must be uploaded
    /// before it is launched; the caller synchronizes that stream).
    ///
    /// # Safety
    /// As for [`add_grid`], with the current context `setter`'s, and `upload` a live stream of
    /// it.
    pub(crate) unsafe fn build(
        setter: &Kernel,
        shape: LaunchShape,
        param: *mut c_void,
        items_per_block: u64,
        body: &BodyKernel,
        upload: CUstream,
    ) -> Result<Self> {
        let mut graph: CUgraph = std::ptr::null_mut();
        // SAFETY: an out-pointer; no flags.
        let status = unsafe { sys::cuGraphCreate(&mut graph, 0) };
        check(status, "cuGraphCreate")?;
        let mut guard = GraphGuard(graph);
        // SAFETY: per this function's contract; a new graph, no dependencies.
        let added = unsafe { add_grid(graph, &[], setter, shape, param, items_per_block, body)? };
        let mut exec: CUgraphExec = std::ptr::null_mut();
        // SAFETY: a complete graph; an out-pointer.
        let status = unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0) };
        check(status, "cuGraphInstantiateWithFlags")?;
        let this = GridGraph {
            graph: std::mem::replace(&mut guard.0, std::ptr::null_mut()),
            exec,
            setter_node: added.setter_node,
            setter: setter.clone(),
            shape,
            dev_node: added.dev_node,
            items_per_block,
        };
        // SAFETY: a live executable graph; a live stream of its context, per the contract.
        let status = unsafe { sys::cuGraphUpload(this.exec, upload) };
        check(status, "cuGraphUpload")?;
        Ok(this)
    }

    /// Sets the setter node's first parameter (the body's handle and items per block stay) and
    /// launches the graph on `stream`.
    ///
    /// # Safety
    /// - the graph's context is current on this thread; `stream` is a live stream of it;
    /// - `param` as for [`Self::build`], and everything it addresses stays valid until the
    ///   launch has run;
    /// - no other thread sets parameters or launches this graph at the same time.
    pub(crate) unsafe fn launch(&self, stream: CUstream, param: *mut c_void) -> Result<()> {
        let mut dev_node = self.dev_node;
        let mut per_block = self.items_per_block;
        let mut args = [
            param,
            (&mut dev_node as *mut DeviceNode).cast(),
            (&mut per_block as *mut u64).cast(),
        ];
        let kp = kernel_params(&self.setter, self.shape, &mut args);
        // SAFETY: a node of this executable graph, the same kernel, not device-updatable; the
        // driver copies the parameters, which affect later launches only.
        let status =
            unsafe { sys::cuGraphExecKernelNodeSetParams_v2(self.exec, self.setter_node, &kp) };
        check(status, "cuGraphExecKernelNodeSetParams")?;
        // SAFETY: a live executable graph and stream of the current context.
        let status = unsafe { sys::cuGraphLaunch(self.exec, stream) };
        check(status, "cuGraphLaunch")
    }
}

impl Drop for GridGraph {
    fn drop(&mut self) {
        // The owner waited for every launch before dropping it.
        // SAFETY: created once in `build`, destroyed once here.
        unsafe {
            let _ = sys::cuGraphExecDestroy(self.exec);
            let _ = sys::cuGraphDestroy(self.graph);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_value_has_cuda_h_size() {
        // CUlaunchAttributeValue: a union padded to 64 bytes; devNode after the int, 8-aligned.
        assert_eq!(std::mem::size_of::<AttributeValue>(), 64);
        assert_eq!(std::mem::offset_of!(AttributeValue, dev_node), 8);
    }
}
