//! The kernels of `csrc/`, compiled by `build.rs` into one fatbin embedded in this crate, and
//! how to launch them.
//!
//! The pack kernel (`srb_pack`) is what [`crate::Readback`] launches. The fatbin also holds the
//! seed program's kernel (`seed_kernel`) and the producer kernels that tests, examples and the
//! comparison harness use (`srb_fill_pattern`, `srb_store_count`, `srb_produce_f64`,
//! `srb_busy_then_count`, `srb_fault`); their C signatures are in `csrc/`.
use crate::driver;
use crate::error::{Error, Result};
use cudarc::driver::sys::{self, CUfunction, CUmodule, CUstream};
use cudarc::driver::CudaContext;
use std::ffi::{c_void, CString};
use std::sync::Arc;

#[repr(C, align(16))]
struct Aligned<B: ?Sized>(B);

// cuModuleLoadData reads the image in place: give it 16-byte alignment.
static FATBIN: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(
    env!("OUT_DIR"),
    "/sized_readback.fatbin"
)));

/// The GPU targets the embedded fatbin holds machine code for, and the PTX it carries.
pub const TARGETS: &str = env!("SIZED_READBACK_ARCHS");

/// The embedded fatbin, loaded into one context.
#[derive(Debug)]
pub struct Module {
    ctx: Arc<CudaContext>,
    module: CUmodule,
}

// SAFETY: a CUmodule handle may be used from any thread that has its context current; every
// use here binds the context first. It is unloaded once, in Drop.
unsafe impl Send for Module {}
// SAFETY: as above; no method mutates the handle.
unsafe impl Sync for Module {}

impl Module {
    /// Loads the embedded fatbin into `ctx`.
    pub fn load(ctx: &Arc<CudaContext>) -> Result<Arc<Self>> {
        driver::ensure_driver()?;
        ctx.bind_to_thread()
            .map_err(Error::cuda("cuCtxSetCurrent"))?;
        // SAFETY: FATBIN is a complete fatbin image produced by nvcc, aligned, and 'static.
        let module = unsafe { cudarc::driver::result::module::load_data(FATBIN.0.as_ptr().cast()) }
            .map_err(Error::cuda("cuModuleLoadData"))?;
        Ok(Arc::new(Module {
            ctx: ctx.clone(),
            module,
        }))
    }

    /// The context the module is loaded in.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Looks up an `extern "C"` kernel by name.
    pub fn function(self: &Arc<Self>, name: &str) -> Result<Kernel> {
        self.ctx
            .bind_to_thread()
            .map_err(Error::cuda("cuCtxSetCurrent"))?;
        let cname = CString::new(name).map_err(|_| Error::config("kernel name contains NUL"))?;
        // SAFETY: the module is loaded and alive for as long as self.
        let func = unsafe { cudarc::driver::result::module::get_function(self.module, cname) }
            .map_err(Error::cuda("cuModuleGetFunction"))?;
        Ok(Kernel {
            module: self.clone(),
            func,
        })
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: loaded once in `load`, unloaded once here; kernels hold an Arc to self, and
        // owners of in-flight launches wait for them before dropping their last Kernel.
        let _ = unsafe { cudarc::driver::result::module::unload(self.module) };
    }
}

/// One kernel of the embedded fatbin.
#[derive(Debug, Clone)]
pub struct Kernel {
    module: Arc<Module>,
    func: CUfunction,
}

// SAFETY: see Module; a CUfunction is an immutable handle into its module.
unsafe impl Send for Kernel {}
// SAFETY: as above.
unsafe impl Sync for Kernel {}

/// Grid and block of a launch, and whether it may overlap the previous kernel's tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchShape {
    /// Blocks (x only).
    pub grid: u32,
    /// Threads per block (x only).
    pub block: u32,
    /// Programmatic dependent launch (sm_90+): the kernel may start before the previous
    /// kernel in the stream finishes, and must wait for it with `griddepcontrol.wait`.
    pub programmatic: bool,
}

impl Kernel {
    /// The module this kernel belongs to.
    pub fn module(&self) -> &Arc<Module> {
        &self.module
    }

    /// The PTX virtual architecture the loaded code was compiled from, times ten (e.g. 90 for
    /// compute_90), from `CU_FUNC_ATTRIBUTE_PTX_VERSION`.
    pub fn ptx_version(&self) -> Result<i32> {
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

    /// Launches the kernel on `stream` with `cuLaunchKernelEx`.
    ///
    /// # Safety
    /// - `params` holds one pointer per kernel parameter, in order, each pointing to a value
    ///   of exactly that parameter's C type, alive for this call;
    /// - every device address passed stays valid until the kernel has finished, and the
    ///   kernel's accesses through them are in bounds;
    /// - `stream` is a live stream of this kernel's context, which is current on this thread;
    /// - with `shape.programmatic`, the kernel calls `griddepcontrol.wait` before it reads
    ///   anything the previous work in the stream writes.
    pub unsafe fn launch(
        &self,
        stream: CUstream,
        shape: LaunchShape,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        let mut attr: sys::CUlaunchAttribute = std::mem::zeroed();
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let config = sys::CUlaunchConfig {
            gridDimX: shape.grid.max(1),
            gridDimY: 1,
            gridDimZ: 1,
            blockDimX: shape.block.max(1),
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: 0,
            hStream: stream,
            attrs: if shape.programmatic {
                &mut attr
            } else {
                std::ptr::null_mut()
            },
            numAttrs: u32::from(shape.programmatic),
        };
        sys::cuLaunchKernelEx(
            &config,
            self.func,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
        .result()
        .map_err(Error::cuda("cuLaunchKernelEx"))
    }
}
