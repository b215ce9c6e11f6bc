//! A kernel that includes the append header, compiled at run time by NVRTC straight to
//! machine code for one device (the `nvrtc` feature).
//!
//! Why machine code and not PTX: the driver loads a cubin without JIT-compiling anything, so
//! the NVRTC found at run time may be newer than the driver (PTX from a newer NVRTC is the usual
//! `CUDA_ERROR_UNSUPPORTED_PTX_VERSION`). Why the header is handed to NVRTC as a named header
//! and not pasted in front of the source: the kernel's source stays the one nvcc compiles with
//! `-I` [`super::INCLUDE_DIR`], and the compile log's line numbers are the source's own.
use cudarc::driver::CudaContext;
use cudarc::nvrtc::result::NvrtcError;
use cudarc::nvrtc::{result, sys, Ptx};
use std::ffi::{c_char, CString};

/// The name NVRTC gives the kernel's source in its log (`kernel.cu(12): error: ...`).
const PROGRAM_NAME: &str = "kernel.cu";

/// The headers a kernel may include, by the names nvcc finds under [`super::INCLUDE_DIR`]:
/// `append.cuh` arrives with `slot.h` in front of it (its own `#include "slot.h"` is then
/// skipped by the include guard).
const HEADERS: [(&str, &str); 2] = [
    ("sized_readback/append.cuh", super::HEADER),
    (
        "sized_readback/slot.h",
        include_str!("../../include/sized_readback/slot.h"),
    ),
];

/// Why [`compile`] or [`compile_for`] gave no module.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// No NVRTC library could be loaded (`libnvrtc.so`, or a versioned name such as
    /// `libnvrtc.so.12`, on the dynamic loader's path).
    #[error(
        "NVRTC could not be loaded (libnvrtc.so): install the CUDA toolkit's NVRTC, or the \
         nvidia-cuda-nvrtc wheel, and put its lib directory on LD_LIBRARY_PATH"
    )]
    NvrtcNotFound,
    /// The source or an option holds a NUL byte, which NVRTC's C strings cannot carry.
    #[error("the {what} holds a NUL byte at byte {position}")]
    Nul {
        /// `"source"` or `"option N"` (counted from 0).
        what: String,
        /// The byte offset of the first NUL.
        position: usize,
    },
    /// The device's compute capability could not be read.
    #[error("reading the device's compute capability: {0}")]
    Device(#[source] crate::Error),
    /// NVRTC compiled nothing: its log says why (an architecture this NVRTC does not know,
    /// or an unknown option, gives `NVRTC_ERROR_INVALID_OPTION` and says so in the log).
    #[error("NVRTC could not compile the kernel for sm_{major}{minor} ({source}):\n{log}")]
    Compile {
        /// The compute capability compiled for.
        major: u32,
        /// The compute capability compiled for.
        minor: u32,
        /// NVRTC's result.
        #[source]
        source: NvrtcError,
        /// The program's log.
        log: String,
    },
    /// Another NVRTC call failed.
    #[error("{call} failed: {source}")]
    Nvrtc {
        /// The NVRTC function.
        call: &'static str,
        /// NVRTC's result.
        #[source]
        source: NvrtcError,
    },
}

/// Compiles `source`, CUDA C++ that includes `<sized_readback/append.cuh>`, with NVRTC to
/// machine code for `ctx`'s device (`--gpu-architecture=sm_XY` from its compute capability,
/// `-std=c++17`, then `options`), ready for `ctx.load_module`. Needs the crate's `nvrtc`
/// feature.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let ctx = sized_readback::device::open(0)?;
/// let source = r#"
/// #include <sized_readback/append.cuh>
/// extern "C" __global__ void odd(srb_append_desc d, const unsigned* x, unsigned n) {
///     using Append = srb::BlockAppend<128, unsigned>;
///     __shared__ Append::TempStorage tmp;
///     Append app(tmp, d);
///     for (unsigned b = blockIdx.x * 128; b < n; b += gridDim.x * 128) {
///         unsigned i = b + threadIdx.x;
///         bool keep = i < n && (x[i] & 1);
///         app.append(keep, keep ? x[i] : 0u);
///     }
///     app.finish();
/// }
/// "#;
/// let module = ctx.load_module(sized_readback::append::compile(&ctx, source, &[])?)?;
/// let odd = module.load_function("odd")?;
/// # let _ = odd; Ok(()) }
/// ```
///
/// Leave the architecture to this function (another `--gpu-architecture` is an NVRTC error).
/// The module is a cubin (cudarc calls every module image [`Ptx`]); it loads on that device's
/// architecture only, and on a driver of the same CUDA major version as NVRTC or newer.
pub fn compile(ctx: &CudaContext, source: &str, options: &[&str]) -> Result<Ptx, CompileError> {
    let capability = crate::device::compute_capability(ctx).map_err(CompileError::Device)?;
    compile_for(capability, source, options)
}

/// [`compile`] for the compute capability `(major, minor)`, with no device: a module built
/// ahead of time, or for a device other than the one at hand. An NVRTC older than the
/// architecture does not know it (`nvrtcGetSupportedArchs` lists what it knows).
pub fn compile_for(
    capability: (u32, u32),
    source: &str,
    options: &[&str],
) -> Result<Ptx, CompileError> {
    cubin(capability, source, options).map(Ptx::from_binary)
}

/// The cubin of [`compile_for`].
fn cubin(
    (major, minor): (u32, u32),
    source: &str,
    options: &[&str],
) -> Result<Vec<u8>, CompileError> {
    let src = c_string(source, || "source".to_owned())?;
    let mut opts = vec![
        format!("--gpu-architecture=sm_{major}{minor}"),
        "-std=c++17".to_owned(),
    ];
    for (i, o) in options.iter().enumerate() {
        c_string(o, || format!("option {i}"))?; // cudarc's compile_program panics on a NUL
        opts.push((*o).to_owned());
    }
    if !nvrtc_present() {
        return Err(CompileError::NvrtcNotFound);
    }
    let prog = create_program(&src)?;
    // SAFETY: `prog` is live (created above) and destroyed once, below, whatever happened.
    let built = unsafe { compile_and_take_cubin(prog, &opts, (major, minor)) };
    // SAFETY: as above; nothing uses `prog` after this.
    let destroyed =
        unsafe { result::destroy_program(prog) }.map_err(|source| CompileError::Nvrtc {
            call: "nvrtcDestroyProgram",
            source,
        });
    let cubin = built?;
    destroyed?;
    Ok(cubin)
}

/// Whether an NVRTC library loads: cudarc panics at its first call without one.
fn nvrtc_present() -> bool {
    // SAFETY: only tries to dlopen the library's names; no NVRTC state is touched.
    unsafe { sys::is_culib_present() }
}

/// `s` as a C string, or the error naming `what()` and its first NUL.
fn c_string(s: &str, what: impl FnOnce() -> String) -> Result<CString, CompileError> {
    CString::new(s).map_err(|e| CompileError::Nul {
        what: what(),
        position: e.nul_position(),
    })
}

/// A program of `src` named [`PROGRAM_NAME`], with [`HEADERS`] includable.
fn create_program(src: &CString) -> Result<sys::nvrtcProgram, CompileError> {
    let name = c_string(PROGRAM_NAME, String::new)?;
    let bodies: Vec<CString> = HEADERS
        .iter()
        .map(|(n, body)| c_string(body, || format!("header {n}")))
        .collect::<Result<_, _>>()?;
    let names: Vec<CString> = HEADERS
        .iter()
        .map(|(n, _)| c_string(n, String::new))
        .collect::<Result<_, _>>()?;
    let body_ptrs: Vec<*const c_char> = bodies.iter().map(|c| c.as_ptr()).collect();
    let name_ptrs: Vec<*const c_char> = names.iter().map(|c| c.as_ptr()).collect();
    let mut prog = std::mem::MaybeUninit::uninit();
    // SAFETY: NVRTC is loaded (nvrtc_present); every pointer is a NUL-terminated string that
    // outlives the call (NVRTC copies them), and the two header arrays have HEADERS.len()
    // entries each.
    unsafe {
        sys::nvrtcCreateProgram(
            prog.as_mut_ptr(),
            src.as_ptr(),
            name.as_ptr(),
            HEADERS.len() as std::ffi::c_int,
            body_ptrs.as_ptr(),
            name_ptrs.as_ptr(),
        )
        .result()
        .map_err(|source| CompileError::Nvrtc {
            call: "nvrtcCreateProgram",
            source,
        })?;
        // SAFETY: written by the successful call.
        Ok(prog.assume_init())
    }
}

/// Compiles `prog` with `opts` and returns its cubin, or the compile error with the log.
///
/// # Safety
/// `prog` must be a live program (from [`create_program`], not yet destroyed).
unsafe fn compile_and_take_cubin(
    prog: sys::nvrtcProgram,
    opts: &[String],
    (major, minor): (u32, u32),
) -> Result<Vec<u8>, CompileError> {
    // SAFETY: `prog` is live (the caller's contract); the options hold no NUL (checked).
    if let Err(source) = unsafe { result::compile_program(prog, opts) } {
        // SAFETY: as above.
        let log = unsafe { result::get_program_log(prog) }.unwrap_or_default();
        let log: Vec<u8> = log
            .iter()
            .map(|&c| c as u8)
            .take_while(|&b| b != 0)
            .collect();
        return Err(CompileError::Compile {
            major,
            minor,
            source,
            log: String::from_utf8_lossy(&log).into_owned(),
        });
    }
    let nvrtc = |call| move |source| CompileError::Nvrtc { call, source };
    let mut size = 0usize;
    // SAFETY: `prog` is live and compiled for a real architecture, so it holds a cubin of
    // the size NVRTC reports; `cubin` has that many bytes.
    unsafe {
        sys::nvrtcGetCUBINSize(prog, &mut size)
            .result()
            .map_err(nvrtc("nvrtcGetCUBINSize"))?;
        let mut cubin = vec![0u8; size];
        sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast())
            .result()
            .map_err(nvrtc("nvrtcGetCUBIN"))?;
        Ok(cubin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ODD: &str = r#"
#include <sized_readback/append.cuh>
extern "C" __global__ void odd(srb_append_desc d, const unsigned* x, unsigned n) {
    using Append = srb::BlockAppend<128, unsigned>;
    __shared__ Append::TempStorage tmp;
    Append app(tmp, d);
    for (unsigned b = blockIdx.x * 128; b < n; b += gridDim.x * 128) {
        unsigned i = b + threadIdx.x;
        bool keep = i < n && (x[i] & 1);
        app.append(keep, keep ? x[i] : 0u);
    }
    app.finish();
}
"#;

    #[test]
    fn a_nul_is_refused_before_nvrtc_is_needed() {
        let e = compile_for((9, 0), "int a;\0", &[]).unwrap_err();
        assert!(
            matches!(&e, CompileError::Nul { what, position: 6 } if what == "source"),
            "{e:?}"
        );
        let e = compile_for((9, 0), "int a;", &["-DA=1", "-DB\0"]).unwrap_err();
        assert!(
            matches!(&e, CompileError::Nul { what, position: 3 } if what == "option 1"),
            "{e:?}"
        );
    }

    /// With NVRTC on the loader's path: a kernel through the header becomes an sm_90 cubin,
    /// and a broken one gives the log at its own line. Without: the error says NVRTC is
    /// missing. `cargo xtask ci` runs it again with the pinned NVRTC 12.0 on LD_LIBRARY_PATH
    /// and `SRB_REQUIRE_NVRTC=1`, so that both halves run in CI.
    #[test]
    fn compiles_through_the_header_or_says_nvrtc_is_missing() {
        if !nvrtc_present() {
            assert!(
                std::env::var_os("SRB_REQUIRE_NVRTC").is_none(),
                "SRB_REQUIRE_NVRTC is set but no NVRTC loads (LD_LIBRARY_PATH={:?})",
                std::env::var_os("LD_LIBRARY_PATH")
            );
            let e = compile_for((9, 0), ODD, &[]).unwrap_err();
            assert!(matches!(e, CompileError::NvrtcNotFound), "{e:?}");
            return;
        }
        let bytes = cubin((9, 0), ODD, &["-DUNUSED=1"]).unwrap();
        assert_eq!(&bytes[..4], b"\x7fELF", "an ELF cubin");
        // e_machine (bytes 18..20 of the ELF header) is EM_CUDA, 190.
        assert_eq!(u16::from_le_bytes([bytes[18], bytes[19]]), 190);

        let broken =
            "#include <sized_readback/append.cuh>\n__global__ void k() { undeclared_name = 1; }\n";
        let e = compile_for((9, 0), broken, &[]).unwrap_err();
        let CompileError::Compile {
            major: 9,
            minor: 0,
            log,
            ..
        } = &e
        else {
            panic!("{e:?}")
        };
        assert!(
            log.contains("kernel.cu(2)") && log.contains("undeclared_name"),
            "{log}"
        );
        let e = compile_for((9, 0), ODD, &["--no-such-option"]).unwrap_err();
        assert!(matches!(e, CompileError::Compile { .. }), "{e:?}");
    }
}
