//! Loading kernel images and launching their kernels. [`Module::library`] loads the library's
//! kernels (`srb_pack`), as chosen for the device by [`super::images`], once per context and
//! shares them between every readback of that context.
//!
//! In a primary context the library's modules stay loaded until the process ends, as the CUDA
//! runtime keeps its own: `cuModuleLoadData` and `cuModuleUnload` wait for every kernel running
//! in the context (measured on driver 580), so a module unloaded with the last readback would
//! make the next build wait for the user's other streams. A non-primary context's modules go
//! with its last user: the context itself is destroyed with its owner.
use super::{driver, images};
use crate::device::compute_capability;
use crate::error::{Error, Result};
use crate::kernel_image::KernelImage;
use crate::launch::LaunchShape;
use cudarc::driver::sys::{self, CUfunction, CUmodule, CUstream};
use cudarc::driver::CudaContext;
use std::ffi::{c_void, CStr};
use std::sync::{Arc, Mutex, Weak};

/// A kernel image loaded into one context.
#[derive(Debug)]
pub(crate) struct Module {
    ctx: Arc<CudaContext>,
    module: CUmodule,
    /// The embedded image loaded: what the device runs, not what would be chosen now.
    image: KernelImage,
}

// SAFETY: a CUmodule handle may be used from any thread that has its context current; every
// use here binds the context first. It is unloaded once, in Drop.
unsafe impl Send for Module {}
// SAFETY: as above; no method mutates the handle.
unsafe impl Sync for Module {}

impl Module {
    /// The library's kernels in `ctx`: loaded on first use, then kept for the process in a
    /// primary context and shared while any user holds them in another.
    pub(crate) fn library(ctx: &Arc<CudaContext>) -> Result<Arc<Self>> {
        static LOADED: Mutex<Vec<(u64, Held)>> = Mutex::new(Vec::new());
        Self::shared(&LOADED, ctx, &images::LIBRARY)
    }

    /// The staged sized copy's pack (`srb_pack_switch`, [`images::SWITCH`]) in `ctx`, shared
    /// alike. Its images need a CUDA 12.8 driver (graph conditionals set from a kernel).
    pub(crate) fn switch(ctx: &Arc<CudaContext>) -> Result<Arc<Self>> {
        static LOADED: Mutex<Vec<(u64, Held)>> = Mutex::new(Vec::new());
        Self::shared(&LOADED, ctx, &images::SWITCH)
    }

    /// The sized launch's grid setter (`srb_size_grid`, [`images::GRID`]) in `ctx`, shared
    /// alike, for the exact-grid form only. Its images need device-updatable graph nodes
    /// (CUDA 12.4), loaded as the switch set's on CUDA 12.8 drivers.
    pub(crate) fn grid(ctx: &Arc<CudaContext>) -> Result<Arc<Self>> {
        static LOADED: Mutex<Vec<(u64, Held)>> = Mutex::new(Vec::new());
        Self::shared(&LOADED, ctx, &images::GRID)
    }

    /// `set`'s module in `ctx`, from `cache`, keyed by the context's unique id: one per primary
    /// context for the process, one per other context while any user holds it.
    fn shared(
        cache: &Mutex<Vec<(u64, Held)>>,
        ctx: &Arc<CudaContext>,
        set: &'static images::ImageSet,
    ) -> Result<Arc<Self>> {
        driver::ensure_driver()?;
        let key = driver::context_id(ctx)?;
        let mut loaded = cache.lock().unwrap_or_else(|p| p.into_inner());
        loaded.retain(|(_, held)| held.alive());
        if let Some(m) = loaded
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, held)| held.get())
        {
            return Ok(m);
        }
        let m = Self::load_set(ctx, set)?.0;
        let held = if ctx.is_primary() {
            Held::Kept(m.clone())
        } else {
            Held::Shared(Arc::downgrade(&m))
        };
        loaded.push((key, held));
        Ok(m)
    }

    /// Loads the image of `set` chosen for `ctx`'s device; says which it loaded.
    pub(crate) fn load_set(
        ctx: &Arc<CudaContext>,
        set: &'static images::ImageSet,
    ) -> Result<(Arc<Self>, KernelImage)> {
        let (major, minor) = compute_capability(ctx)?;
        let (kernel_image, image) = set.select(major, minor, images::force_ptx_jit())?;
        // SAFETY: the committed images are complete cubins (16-byte aligned) or NUL-terminated
        // PTX, all 'static.
        let module = unsafe { Self::load(ctx, image, kernel_image)? };
        Ok((module, kernel_image))
    }

    /// The embedded image this module was loaded from.
    pub(crate) fn image(&self) -> KernelImage {
        self.image
    }

    /// Loads `image` (the embedded image `which`) into `ctx`.
    ///
    /// # Safety
    /// `image` is a complete cubin (16-byte aligned) or NUL-terminated PTX image.
    unsafe fn load(
        ctx: &Arc<CudaContext>,
        image: &'static [u8],
        which: KernelImage,
    ) -> Result<Arc<Self>> {
        driver::bind(ctx)?;
        // SAFETY: per the contract; the image outlives the module ('static).
        let module = unsafe { cudarc::driver::result::module::load_data(image.as_ptr().cast()) }
            .map_err(Error::cuda("cuModuleLoadData"))?;
        Ok(Arc::new(Module {
            ctx: ctx.clone(),
            module,
            image: which,
        }))
    }

    /// Looks up an `extern "C"` kernel by name.
    pub(crate) fn function(self: &Arc<Self>, name: &CStr) -> Result<Kernel> {
        driver::bind(&self.ctx)?;
        let mut func: CUfunction = std::ptr::null_mut();
        // SAFETY: the module is loaded and alive for as long as self; func is an out-pointer.
        unsafe { sys::cuModuleGetFunction(&mut func, self.module, name.as_ptr()) }
            .result()
            .map_err(Error::cuda("cuModuleGetFunction"))?;
        Ok(Kernel {
            _module: self.clone(),
            func,
        })
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        let _ = driver::bind(&self.ctx);
        // SAFETY: loaded once in `load`, unloaded once here; kernels hold an Arc to self, and
        // owners of in-flight launches wait for them before dropping their last Kernel.
        let _ = unsafe { cudarc::driver::result::module::unload(self.module) };
    }
}

/// A module in a cache: kept loaded (a primary context's) or shared while a user holds it.
///
/// A kept module holds its primary context retained, and is never dropped: a static is not, so
/// no unload runs at exit, when the driver may already be shutting down, nor after a device
/// reset destroyed the context (its entry then has an id no context will have again).
#[derive(Debug)]
enum Held {
    Kept(Arc<Module>),
    Shared(Weak<Module>),
}

impl Held {
    /// Whether the module is still loaded. No upgrade: a temporary `Arc` could become the last
    /// owner, and its drop would unload the module inside the cache's lock.
    fn alive(&self) -> bool {
        match self {
            Held::Kept(_) => true,
            Held::Shared(w) => w.strong_count() > 0,
        }
    }

    fn get(&self) -> Option<Arc<Module>> {
        match self {
            Held::Kept(m) => Some(m.clone()),
            Held::Shared(w) => w.upgrade(),
        }
    }
}

/// One kernel of a loaded module.
#[derive(Debug, Clone)]
pub(crate) struct Kernel {
    /// Keeps the module loaded while the kernel is in use.
    _module: Arc<Module>,
    func: CUfunction,
}

// SAFETY: see Module; a CUfunction is an immutable handle into its module.
unsafe impl Send for Kernel {}
// SAFETY: as above.
unsafe impl Sync for Kernel {}

impl Kernel {
    /// The function handle, for a graph's kernel node; valid while `self` lives.
    pub(crate) fn raw(&self) -> CUfunction {
        self.func
    }

    /// The PTX virtual architecture the loaded code was compiled from, times ten (e.g. 90 for
    /// compute_90), from `CU_FUNC_ATTRIBUTE_PTX_VERSION`.
    pub(crate) fn ptx_version(&self) -> Result<i32> {
        let mut v = 0;
        // SAFETY: a live function handle (its module is kept alive by self) and an out-pointer.
        unsafe {
            sys::cuFuncGetAttribute(
                &mut v,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_PTX_VERSION,
                self.func,
            )
        }
        .result()
        .map_err(Error::cuda("cuFuncGetAttribute"))?;
        Ok(v)
    }

    /// Launches the kernel on `stream` with `cuLaunchKernelEx`, with programmatic dependent
    /// launch if `shape` asks for it.
    ///
    /// # Safety
    /// - `params` holds one pointer per kernel parameter, in order, each pointing to a value
    ///   of exactly that parameter's C type, alive for this call;
    /// - every device address passed stays valid until the kernel has finished, and the
    ///   kernel's accesses through them are in bounds;
    /// - `stream` is a live stream of this kernel's context, which is current on this thread;
    /// - with `shape.programmatic`, the kernel calls `griddepcontrol.wait` before it reads
    ///   anything the previous work in the stream writes.
    pub(crate) unsafe fn launch(
        &self,
        stream: CUstream,
        shape: LaunchShape,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        let mut attr = programmatic();
        let config = launch_config(
            stream,
            (shape.grid, 1, 1),
            (shape.block, 1, 1),
            shape.programmatic.then_some(&mut attr),
        );
        // SAFETY: per the contract; config and attr live for the call.
        unsafe {
            sys::cuLaunchKernelEx(
                &config,
                self.func,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()
        .map_err(Error::cuda("cuLaunchKernelEx"))
    }

    /// [`Kernel::launch`] with a 3-D grid and block, without programmatic launch.
    ///
    /// # Safety
    /// As [`Kernel::launch`].
    #[cfg(feature = "testing")]
    pub(crate) unsafe fn launch_3d(
        &self,
        stream: CUstream,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        params: &mut [*mut c_void],
    ) -> Result<()> {
        let config = launch_config(stream, grid, block, None);
        // SAFETY: per the contract; config lives for the call.
        unsafe {
            sys::cuLaunchKernelEx(
                &config,
                self.func,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()
        .map_err(Error::cuda("cuLaunchKernelEx"))
    }
}

/// The launch attribute that allows programmatic dependent launch.
fn programmatic() -> sys::CUlaunchAttribute {
    // SAFETY: CUlaunchAttribute is plain data; zero is a valid (unused) value.
    let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    attr
}

/// A launch of `grid` blocks of `block` threads on `stream`, with `attr` if given (it must
/// outlive the launch).
fn launch_config(
    stream: CUstream,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    attr: Option<&mut sys::CUlaunchAttribute>,
) -> sys::CUlaunchConfig {
    let num_attrs = u32::from(attr.is_some());
    sys::CUlaunchConfig {
        gridDimX: grid.0.max(1),
        gridDimY: grid.1.max(1),
        gridDimZ: grid.2.max(1),
        blockDimX: block.0.max(1),
        blockDimY: block.1.max(1),
        blockDimZ: block.2.max(1),
        sharedMemBytes: 0,
        hStream: stream,
        attrs: attr.map_or(std::ptr::null_mut(), |a| a as *mut _),
        numAttrs: num_attrs,
    }
}
