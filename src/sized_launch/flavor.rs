//! The sized launch's two flavors behind the one public type: a SWITCH over size classes, whose
//! bodies may hold anything a capture records (library calls too), and the exact-grid form, one
//! kernel whose grid the device sets from the count in the same launch (`raw::grid_graph`).
use super::params::SizeSwitchParams;
use super::SETTER_SHAPE;
use crate::error::{Error, Result};
use crate::raw::grid_graph::{self, BodyKernel, GridGraph};
use crate::raw::module::{Kernel, Module};
use crate::raw::switch_graph::{self, GraphGuard, SwitchGraph};
use cudarc::driver::sys::{CUcontext, CUgraph, CUstream};
use cudarc::driver::CudaContext;
use std::ffi::c_void;
use std::sync::Arc;

#[derive(Debug)]
pub(super) enum Flavor {
    /// `[srb_size_switch] -> SWITCH(bodies)`.
    Switch { kernel: Kernel, graph: SwitchGraph },
    /// `[srb_size_grid] -> [the one body kernel, device-updatable]`.
    Grid {
        kernel: Kernel,
        graph: GridGraph,
        body: BodyKernel,
        items_per_block: u64,
    },
}

/// The flavor's setter in `ctx` (bound): `srb_size_grid` for the exact grid, else
/// `srb_size_switch`; loaded before the bodies are recorded, as the SWITCH's always was.
pub(super) fn setter(ctx: &Arc<CudaContext>, exact_grid: bool) -> Result<Kernel> {
    let loaded = if exact_grid {
        Module::grid(ctx).and_then(|m| m.function(c"srb_size_grid"))
    } else {
        Module::switch(ctx).and_then(|m| m.function(c"srb_size_switch"))
    };
    loaded.map_err(unavailable)
}

impl Flavor {
    /// Builds the flavor: the exact grid where `items_per_block` is given (one class, whose
    /// body must be one kernel launch), else the SWITCH over `classes`, from the bodies as
    /// captured, with `kernel`, [`setter`]'s for that flavor. Uploads on `upload` (the caller
    /// synchronizes it).
    ///
    /// # Safety
    /// `ctx` is bound; `params` is the setter's parameter (it addresses the status memory,
    /// which outlives the flavor); the bodies' resources are the caller's to keep alive
    /// (documented on `SizedLaunch`); `upload` is a stream of `ctx`.
    pub(super) unsafe fn build(
        ctx: &Arc<CudaContext>,
        kernel: Kernel,
        classes: &[u64],
        items_per_block: Option<u64>,
        params: &mut SizeSwitchParams,
        bodies: &[Option<GraphGuard>],
        upload: CUstream,
    ) -> Result<Self> {
        let param = (params as *mut SizeSwitchParams).cast::<c_void>();
        if let Some(items_per_block) = items_per_block {
            let body = one_kernel(bodies, classes)?;
            // SAFETY: per this function's contract; srb_size_grid takes srb_size_switch_params
            // (mirrored), the body's device handle and a uint64_t; the body's graph is in
            // `bodies`, which the sized launch keeps.
            let graph = unsafe {
                GridGraph::build(&kernel, SETTER_SHAPE, param, items_per_block, &body, upload)
            }
            .map_err(unavailable)?;
            return Ok(Flavor::Grid {
                kernel,
                graph,
                body,
                items_per_block,
            });
        }
        let k = classes.len() as u32;
        // SAFETY: the context is bound and is the kernel's; srb_size_switch takes
        // srb_size_switch_params then the handle; the bodies are clones of what the closure
        // captured; `upload` is a stream of the context.
        let graph = unsafe {
            SwitchGraph::build(
                ctx.cu_ctx(),
                &kernel,
                SETTER_SHAPE,
                param,
                k,
                k,
                |i, body| {
                    add_body(body, &bodies[i]).map_err(|e| Error::BodyRecording {
                        class: i,
                        n_max: classes[i],
                        reason: format!("the driver refused the captured body: {e}"),
                    })
                },
                upload,
            )
        }
        .map_err(unavailable)?;
        Ok(Flavor::Switch { kernel, graph })
    }

    /// Sets the setter's parameter and launches on `stream`.
    ///
    /// # Safety
    /// The context is bound; `stream` is a live stream of it; `params` addresses the status
    /// memory; no other thread launches this flavor at the same time.
    pub(super) unsafe fn launch(
        &self,
        stream: CUstream,
        params: &mut SizeSwitchParams,
    ) -> Result<()> {
        let param = (params as *mut SizeSwitchParams).cast::<c_void>();
        match self {
            // SAFETY: per the contract.
            Flavor::Switch { graph, .. } => unsafe { graph.launch(stream, param) },
            // SAFETY: per the contract.
            Flavor::Grid { graph, .. } => unsafe { graph.launch(stream, param) },
        }
    }

    /// Adds the launch to the graph `stream` is capturing, after its current work.
    ///
    /// # Safety
    /// `ctx` is current and the flavor's; `stream` a live stream of it, capturing; `params`
    /// addresses the status memory, which outlives every launch of the captured graph, as do
    /// `bodies` and their resources.
    pub(super) unsafe fn record(
        &self,
        ctx: CUcontext,
        stream: CUstream,
        params: &mut SizeSwitchParams,
        bodies: &[Option<GraphGuard>],
    ) -> Result<()> {
        let param = (params as *mut SizeSwitchParams).cast::<c_void>();
        let recorded = match self {
            Flavor::Switch { kernel, .. } => {
                let k = bodies.len() as u32;
                // SAFETY: per the contract; the bodies are clones of the captured ones.
                unsafe {
                    switch_graph::capture_switch(
                        ctx,
                        stream,
                        kernel,
                        SETTER_SHAPE,
                        param,
                        k,
                        k,
                        |i, body| add_body(body, &bodies[i]),
                    )
                }
            }
            Flavor::Grid {
                kernel,
                body,
                items_per_block,
                ..
            } => {
                // SAFETY: per the contract; a new node from the captured body's parameters.
                unsafe {
                    grid_graph::capture_grid(
                        stream,
                        kernel,
                        SETTER_SHAPE,
                        param,
                        *items_per_block,
                        body,
                    )
                }
            }
        };
        // A driver without an entry point the graph needs: sized launches are unavailable.
        recorded.map_err(unavailable)
    }

    /// Whether the device reports a refused grid update in the status entry's last word.
    pub(super) fn sets_grids(&self) -> bool {
        matches!(self, Flavor::Grid { .. })
    }
}

/// The exact-grid form's one body: one kernel launch, or the class's [`Error::BodyRecording`].
fn one_kernel(bodies: &[Option<GraphGuard>], classes: &[u64]) -> Result<BodyKernel> {
    let refused = |reason: String| Error::BodyRecording {
        class: 0,
        n_max: classes[0],
        reason,
    };
    let Some(Some(captured)) = bodies.first() else {
        return Err(refused(
            "the exact-grid form takes a body of one kernel launch; it recorded nothing".into(),
        ));
    };
    // SAFETY: a live graph of the bound context, kept in `bodies` by the sized launch.
    let body = unsafe { BodyKernel::of(captured.0) }.map_err(refused)?;
    // The setter sets the grid to (blocks, 1, 1): a 2-D or 3-D launch would lose its y and z.
    let (x, y, z) = body.recorded_grid();
    if (y, z) != (1, 1) {
        return Err(refused(format!(
            "the exact-grid form sets a 1-D grid; the body's kernel was launched with a grid \
             of ({x}, {y}, {z})"
        )));
    }
    Ok(body)
}

/// Fills a SWITCH body with a clone of `captured` (nothing for an empty body).
fn add_body(body: CUgraph, captured: &Option<GraphGuard>) -> Result<()> {
    match captured {
        // SAFETY: both live graphs of the bound context; a capture holds no conditional node
        // the body could not take (the driver refuses what it cannot, with an error).
        Some(g) => unsafe { switch_graph::add_child(body, g.0) },
        None => Ok(()),
    }
}

/// A driver that refuses the setter's image or graph makes sized launches unavailable; a
/// body's error and any other error pass unchanged.
pub(super) fn unavailable(e: Error) -> Error {
    match crate::engine::sized_copy::unavailable(e) {
        Error::SizedCopyUnavailable { reason } => Error::SizedLaunchUnavailable { reason },
        e => e,
    }
}
